// A weight matrix laid out once, at load, for one device's matrix products (MatmulOptions::prepared_b).
// The CPU packs a Dense weight [n, k] into column panels its own kernels stream without repacking it at
// every product (cpu/matmul.cc otherwise packs the panels it reads at each call), in fp32 or quantized to
// int8; a device without a prepared form reads the plain tensor.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace seqtrans::ops {

enum class WeightFormat {
  Plain,   // the tensor as it is
  Packed,  // fp32 panels: the products' bits as with the plain tensor (cpu/packed_matrix.h says where)
  Int8,    // int8 panels, a symmetric scale per output channel, products in int32 (not exact: an approximation)
};

const char* weight_format_name(WeightFormat format);

class PreparedWeight {
 public:
  virtual ~PreparedWeight() = default;
  virtual WeightFormat format() const = 0;
  virtual int64_t rows() const = 0;  // n: output channels
  virtual int64_t cols() const = 0;  // k: input channels
};

// `weight` [n, k] in `format` for its device; null where the device reads the plain tensor (CUDA, the
// Plain format, a CPU whose vector sets have no packed kernels). The CPU's Packed panels are written by
// the products that read them (cpu/packed_matrix.h): the products read `weight` until then. pack_now writes
// them here: for a weight every decoder step reads (an untied output layer), whose plain values can then go
// before the rest of the model loads.
std::shared_ptr<const PreparedWeight> prepare_weight(const Tensor& weight, WeightFormat format, bool pack_now = false);

// Whether this machine's `device` has kernels that read weights in `format`: plain everywhere; packed and
// int8 on a CPU with AVX2 (prepare_weight returns none elsewhere, and the products read the plain weight).
bool weight_format_available(WeightFormat format, Device device);

}  // namespace seqtrans::ops
