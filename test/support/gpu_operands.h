// The CUDA op tests' inputs and readbacks: one random operand as the CPU sees it (fp32, already rounded to
// fp16 when testing fp16) and on the GPU, and the tolerance each dtype is held to against the CPU.
#pragma once

#ifdef SEQTRANS_WITH_CUDA

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "cuda/runtime/context.h"
#include "support/random_tensor.h"

namespace seqtrans::testing {

struct Operand {
  Tensor cpu;
  Tensor gpu;
};

inline Operand upload(const Tensor& host, DataType dtype) {
  const Tensor rounded = dtype == DataType::F16 ? host.to(DataType::F16).to(DataType::F32) : host;
  return {rounded, host.to(dtype).to(Device::CUDA)};
}

inline Operand random_operand(const Shape& shape, DataType dtype, float low = -1.0f, float high = 1.0f) {
  return upload(random_floats(shape, low, high), dtype);
}

inline double tolerance(DataType dtype) { return dtype == DataType::F16 ? 1e-2 : 1e-5; }

// A tensor's values on the host once the device is done with it.
inline std::vector<float> values_of(const Tensor& x) {
  cuda::synchronize();
  return x.to_float_vector();
}
inline std::vector<int32_t> ints_of(const Tensor& x) {
  cuda::synchronize();
  return x.to_int_vector();
}

inline const DataType kFloatTypes[] = {DataType::F32, DataType::F16};

}  // namespace seqtrans::testing

#endif  // SEQTRANS_WITH_CUDA
