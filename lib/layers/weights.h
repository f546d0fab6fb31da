// Fetches named weights from a model file and places them on the compute device in the compute dtype.
#pragma once

#include <string>

#include "core/tensor.h"
#include "models/model_file.h"

namespace seqtrans {

class WeightLoader {
 public:
  WeightLoader(const ModelFile& file, Device device, DataType dtype) : file_(file), device_(device), dtype_(dtype) {}

  // The tensor `name`, checked against `shape`, converted to the compute dtype and device.
  Tensor get(const std::string& name, const Shape& shape) const;
  bool has(const std::string& name) const { return file_.has_tensor(name); }
  Device device() const { return device_; }
  DataType dtype() const { return dtype_; }

 private:
  const ModelFile& file_;
  Device device_;
  DataType dtype_;
};

}  // namespace seqtrans
