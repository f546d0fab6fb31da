// Element types a Tensor can hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace seqtrans {

enum class DataType { F32, F16, I32 };

inline size_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::F32: return 4;
    case DataType::F16: return 2;
    case DataType::I32: return 4;
  }
  return 0;
}

inline const char* dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::F32: return "fp32";
    case DataType::F16: return "fp16";
    case DataType::I32: return "int32";
  }
  return "?";
}

// IEEE half <-> float conversion on the host (round to nearest even); used when loading fp16 weights
// for the CPU engine and by tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
// out[i] = half_to_float(in[i]) for i < count, with the CPU's conversion instruction where it has one
// (F16C: exact, so the same floats; signaling NaNs come back quiet): loading a model's fp16 weights for the CPU took 60-130 ms without.
void halves_to_floats(const uint16_t* in, float* out, int64_t count);

}  // namespace seqtrans
