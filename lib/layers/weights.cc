#include "layers/weights.h"

#include "core/error.h"
#include "core/host_arena.h"

namespace seqtrans {

DenseWeight WeightLoader::get_dense(const std::string& name, const Shape& shape) const {
  if (dense_format_ != ops::WeightFormat::Int8 || !ops::weight_format_available(dense_format_, device_)) {
    Tensor weight = get(name, shape);
    auto prepared = ops::prepare_weight(weight, dense_format_);
    return {std::move(weight), std::move(prepared)};
  }
  Tensor plain;
  {
    const HostArenaScope heap(nullptr);
    plain = get(name, shape);
  }
  auto prepared = ops::prepare_weight(plain, dense_format_);
  SEQTRANS_CHECK(prepared != nullptr, "{}: no int8 form on this device", name);
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
