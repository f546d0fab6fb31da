// Fetches named weights from a model file and places them on the compute device in the compute dtype.
#pragma once

#include <string>

#include "core/tensor.h"
#include "format/model_file.h"
#include "ops/prepared_weight.h"

namespace seqtrans {

class WeightLoader {
 public:
  // Dense weights are prepared in `dense_format` where the device has such a form (ops::prepare_weight).
  WeightLoader(const ModelFile& file, Device device, DataType dtype,
               ops::WeightFormat dense_format = ops::WeightFormat::Plain)
      : file_(file), device_(device), dtype_(dtype), dense_format_(dense_format) {}

  // The tensor `name`, checked against `shape`, converted to the compute dtype and device.
  Tensor get(const std::string& name, const Shape& shape) const;
  bool has(const std::string& name) const { return file_.has_tensor(name); }
  // A Dense weight, as get() returned it, in dense_format for the products; null: use it as it is.
  std::shared_ptr<const ops::PreparedWeight> prepare_dense(const Tensor& weight) const {
    return ops::prepare_weight(weight, dense_format_);
  }
  Device device() const { return device_; }
  ops::WeightFormat dense_format() const { return dense_format_; }
  DataType dtype() const { return dtype_; }

 private:
  const ModelFile& file_;
  Device device_;
  DataType dtype_;
  ops::WeightFormat dense_format_;
};

}  // namespace seqtrans
