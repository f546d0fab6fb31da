#include "layers/weights.h"

namespace seqtrans {

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
