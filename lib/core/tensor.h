// Tensor: a dense, row-major, typed view of memory on one device. Storage is shared between views.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace seqtrans {

using Shape = std::vector<int64_t>;
class Allocator;

std::string shape_string(const Shape& shape);
int64_t shape_elements(const Shape& shape);

// Owns (or borrows) one block of memory; freed through the allocator it came from when the last view
// goes away (with several GPUs, that may be another thread's device).
class Storage {
 public:
  Storage(Device device, size_t bytes);                  // allocates
  Storage(Device device, void* borrowed, size_t bytes);  // wraps memory owned elsewhere
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  Allocator* allocator_;  // null when borrowed
  void* data_;
  size_t bytes_;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized tensor of the given shape.
  Tensor(const Shape& shape, DataType dtype, Device device = Device::CPU);

  // View over memory owned elsewhere (e.g. a loaded model file); the caller keeps it alive.
  static Tensor borrow(void* data, const Shape& shape, DataType dtype, Device device);
  // A shape, dtype and device with no memory: defined, but reading its data throws. Stands for a weight
  // whose products read only its prepared form (an int8 weight's fp32 values are not kept).
  static Tensor shape_only(const Shape& shape, DataType dtype, Device device);
  // Host fp32 / int32 tensors from values, for tests and small inputs.
  static Tensor from_floats(const Shape& shape, const std::vector<float>& values);
  static Tensor from_ints(const Shape& shape, const std::vector<int32_t>& values);

  bool defined() const { return storage_ != nullptr || shape_only_; }
  // Whether it has memory: defined and not shape_only.
  bool has_data() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int axis) const;  // negative axes count from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t elements() const { return shape_elements(shape_); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype_); }
  DataType dtype() const { return dtype_; }
  Device device() const { return device_; }

  void* raw() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Same memory, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) along the first axis, sharing memory.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Deep copy to another device and/or dtype (fp32 <-> fp16 conversion included).
  Tensor to(Device device) const;
  Tensor to(DataType dtype) const;
  // Copies `source` (same shape and dtype, any device) into this tensor's memory.
  void copy_from(const Tensor& source);

  // Host-side convenience for tests and small tensors (copies from the device if needed).
  std::vector<float> to_float_vector() const;
  std::vector<int32_t> to_int_vector() const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DataType dtype_ = DataType::F32;
  Device device_ = Device::CPU;
  bool shape_only_ = false;
};

}  // namespace seqtrans
