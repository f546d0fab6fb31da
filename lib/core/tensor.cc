#include "core/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/allocator.h"
#include "core/device_copy.h"

namespace seqtrans {

std::string shape_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t shape_elements(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

Storage::Storage(Device device, size_t bytes)
    : device_(device), allocator_(&allocator_for(device)), data_(allocator_->allocate(bytes)), bytes_(bytes) {}

Storage::Storage(Device device, void* borrowed, size_t bytes)
    : device_(device), allocator_(nullptr), data_(borrowed), bytes_(bytes) {}

Storage::~Storage() {
  if (allocator_ == nullptr) return;
  try {
    allocator_->deallocate(data_, bytes_);
  } catch (const std::exception& error) {
    // Only a bug gets here (memory returned to an allocator that never handed it out, or twice): a
    // destructor cannot throw, and going on would corrupt the allocator's free lists.
    std::fprintf(stderr, "seqtrans: internal error: %s\n", error.what());
    std::abort();
  }
}

Tensor::Tensor(const Shape& shape, DataType dtype, Device device)
    : shape_(shape), dtype_(dtype), device_(device) {
  for (int64_t extent : shape) SEQTRANS_CHECK(extent >= 0, "negative extent in shape {}", shape_string(shape));
  storage_ = std::make_shared<Storage>(device, bytes());
}

Tensor Tensor::borrow(void* data, const Shape& shape, DataType dtype, Device device) {
  Tensor tensor;
  tensor.shape_ = shape;
  tensor.dtype_ = dtype;
  tensor.device_ = device;
  tensor.storage_ = std::make_shared<Storage>(device, data, tensor.bytes());
  return tensor;
}

Tensor Tensor::shape_only(const Shape& shape, DataType dtype, Device device) {
  Tensor tensor;
  tensor.shape_ = shape;
  tensor.dtype_ = dtype;
  tensor.device_ = device;
  tensor.shape_only_ = true;
  return tensor;
}

Tensor Tensor::from_floats(const Shape& shape, const std::vector<float>& values) {
  SEQTRANS_CHECK(static_cast<int64_t>(values.size()) == shape_elements(shape),
                 "{} values do not fill shape {}", values.size(), shape_string(shape));
  Tensor tensor(shape, DataType::F32);
  if (tensor.bytes() > 0) std::memcpy(tensor.raw(), values.data(), tensor.bytes());
  return tensor;
}

Tensor Tensor::from_ints(const Shape& shape, const std::vector<int32_t>& values) {
  SEQTRANS_CHECK(static_cast<int64_t>(values.size()) == shape_elements(shape),
                 "{} values do not fill shape {}", values.size(), shape_string(shape));
  Tensor tensor(shape, DataType::I32);
  // memcpy wants valid pointers even for no bytes, and an empty vector's data() may be null.
  if (tensor.bytes() > 0) std::memcpy(tensor.raw(), values.data(), tensor.bytes());
  return tensor;
}

int64_t Tensor::dim(int axis) const {
  const int resolved = axis < 0 ? axis + rank() : axis;
  SEQTRANS_CHECK(resolved >= 0 && resolved < rank(), "axis {} out of range for shape {}", axis,
                 shape_string(shape_));
  return shape_[resolved];
}

void* Tensor::raw() const {
  if (storage_ == nullptr) {  // one test on the hot path; which misuse it is, only when it fails
    SEQTRANS_CHECK(!shape_only_, "use of the memory of a tensor that has only a shape ({} {})", dtype_name(dtype_),
                   shape_string(shape_));
    throw Error("use of an undefined tensor");
  }
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

Tensor Tensor::reshape(const Shape& shape) const {
  SEQTRANS_CHECK(shape_elements(shape) == elements(), "cannot reshape {} to {}", shape_string(shape_),
                 shape_string(shape));
  Tensor view = *this;
  view.shape_ = shape;
  return view;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  SEQTRANS_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= shape_[0],
                 "row slice [{}, {}) out of range for shape {}", begin, end, shape_string(shape_));
  Tensor view = *this;
  const int64_t row_elements = shape_[0] == 0 ? 0 : elements() / shape_[0];
  view.offset_bytes_ += static_cast<size_t>(begin * row_elements) * dtype_size(dtype_);
  view.shape_[0] = end - begin;
  return view;
}

void Tensor::copy_from(const Tensor& source) {
  SEQTRANS_CHECK(source.shape_ == shape_ && source.dtype_ == dtype_, "copy from {} {} into {} {}",
                 dtype_name(source.dtype_), shape_string(source.shape_), dtype_name(dtype_),
                 shape_string(shape_));
  copy_bytes(device_, raw(), source.device_, source.raw(), bytes());
}

Tensor Tensor::to(Device device) const {
  Tensor copy(shape_, dtype_, device);
  copy.copy_from(*this);
  return copy;
}

Tensor Tensor::to(DataType dtype) const {
  if (dtype == dtype_) return *this;
  SEQTRANS_CHECK(device_ == Device::CPU, "dtype conversion of device tensors goes through ops::convert");
  Tensor converted(shape_, dtype, Device::CPU);
  const int64_t count = elements();
  if (dtype_ == DataType::F16 && dtype == DataType::F32) {
    halves_to_floats(data<uint16_t>(), converted.data<float>(), count);
  } else if (dtype_ == DataType::F32 && dtype == DataType::F16) {
    const float* in = data<float>();
    uint16_t* out = converted.data<uint16_t>();
    for (int64_t i = 0; i < count; ++i) out[i] = float_to_half(in[i]);
  } else {
    throw Error(fmt::format("no conversion from {} to {}", dtype_name(dtype_), dtype_name(dtype)));
  }
  return converted;
}

std::vector<float> Tensor::to_float_vector() const {
  Tensor host = device_ == Device::CPU ? *this : to(Device::CPU);
  host = host.to(DataType::F32);
  SEQTRANS_CHECK(host.dtype() == DataType::F32, "tensor of {} is not a float tensor", dtype_name(dtype_));
  const float* values = host.data<float>();
  return std::vector<float>(values, values + elements());
}

std::vector<int32_t> Tensor::to_int_vector() const {
  SEQTRANS_CHECK(dtype_ == DataType::I32, "tensor of {} is not an int32 tensor", dtype_name(dtype_));
  Tensor host = device_ == Device::CPU ? *this : to(Device::CPU);
  const int32_t* values = host.data<int32_t>();
  return std::vector<int32_t>(values, values + elements());
}

}  // namespace seqtrans
