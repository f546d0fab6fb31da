// Fetches named weights from a model file and places them on the compute device in the compute dtype.
#pragma once

#include <string>

#include "core/tensor.h"
#include "format/model_file.h"
#include "ops/prepared_weight.h"

namespace seqtrans {

// A Dense weight as its products take it: the plain tensor [out, in] (shape only where the products read
// nothing but the prepared form) and the prepared form, if the device has one.
struct DenseWeight {
  Tensor weight;
  std::shared_ptr<const ops::PreparedWeight> prepared;
};

class WeightLoader {
 public:
  // Dense weights are prepared in `dense_format` where the device has such a form (ops::prepare_weight).
  WeightLoader(const ModelFile& file, Device device, DataType dtype,
               ops::WeightFormat dense_format = ops::WeightFormat::Plain)
      : file_(file), device_(device), dtype_(dtype), dense_format_(dense_format) {}

  // The tensor `name`, checked against `shape`, converted to the compute dtype and device.
  Tensor get(const std::string& name, const Shape& shape) const;
  bool has(const std::string& name) const { return file_.has_tensor(name); }
  // The Dense weight `name`, prepared in dense_format where the device has that form. Int8 keeps only the
  // quantized form: the fp32 values are read outside the model's arena (which never frees, core/host_arena.h)
  // and dropped once quantized, so an int8 model holds a quarter of the fp32 weights' memory, not 1.25 times.
  // Large fp32 weights packed on use keep their plain values only until their panels are written; pack_now
  // writes them here (ops::prepare_weight's pack_now), so that a large weight's plain values are gone on return.
  DenseWeight get_dense(const std::string& name, const Shape& shape, bool pack_now = false) const;
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
