#include "layers/weights.h"

#include "core/error.h"
#include "core/host_arena.h"

namespace seqtrans {

namespace {

// Plain fp32 weights at least this large that are packed on use get an arena of their own, which unmaps once
// the panels are written and the plain values dropped. Smaller ones stay in the model's arena: an arena's huge
// pages would round a small weight's memory up to 2 MiB.
constexpr size_t kOwnArenaMinBytes = size_t{8} << 20;

}  // namespace

DenseWeight WeightLoader::get_dense(const std::string& name, const Shape& shape, bool pack_now) const {
  const bool prepared_on_cpu = device_ == Device::CPU && ops::weight_format_available(dense_format_, device_) &&
                               dense_format_ != ops::WeightFormat::Plain;
  const bool own_memory =
      prepared_on_cpu && (dense_format_ == ops::WeightFormat::Int8 ||
                          static_cast<size_t>(shape_elements(shape)) * sizeof(float) >= kOwnArenaMinBytes);
  if (!own_memory) {
    Tensor weight = get(name, shape);
    auto prepared = ops::prepare_weight(weight, dense_format_, pack_now);
    return {std::move(weight), std::move(prepared)};
  }
  // The plain values in memory of their own, outside the model's arena (which never frees): the heap for
  // int8, dropped once quantized; an arena of their own for fp32 panels, which the matrix frees once it has
  // written them (cpu::PackedMatrix::use), or which goes on return (pack_now). The layer keeps the weight's
  // shape only.
  Tensor plain;
  {
    const HostArenaRef own = dense_format_ == ops::WeightFormat::Packed ? HostArena::open() : HostArenaRef();
    const HostArenaScope scope(own.get());
    plain = get(name, shape);
  }
  auto prepared = ops::prepare_weight(plain, dense_format_, pack_now);
  SEQTRANS_CHECK(prepared != nullptr, "{}: no {} form on this device", name, ops::weight_format_name(dense_format_));
  return {Tensor::shape_only(plain.shape(), plain.dtype(), plain.device()), std::move(prepared)};
}

Tensor WeightLoader::get(const std::string& name, const Shape& shape) const {
  const Tensor& stored = file_.tensor(name, shape);
  // Convert on the host, then copy once: the file is mapped host memory either way.
  Tensor converted = stored.dtype() == dtype_ ? stored : stored.to(dtype_);
  if (device_ == Device::CPU) {
    // Own the memory so the model does not depend on the mapping's lifetime.
    return converted.raw() == stored.raw() ? stored.to(Device::CPU) : converted;
  }
  return converted.to(device_);
}

}  // namespace seqtrans
