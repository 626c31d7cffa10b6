// Typed tensors: a dtype, an int64 shape (row-major, contiguous), the device
// the memory lives on, and shared ownership of storage recorded in a
// MemoryTracker. Views share storage; element counts are int64 everywhere.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "runtime/check.h"
#include "runtime/dtype.h"
#include "runtime/memory.h"

namespace pf {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3, 4]"

class Storage {
 public:
  Storage(MemoryTracker& tracker, int64_t bytes, std::string tag);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return ptr_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return tracker_.device(); }
  // The stream the storage is released on (its tracker's).
  Stream stream() const { return tracker_.stream(); }
  const std::string& tag() const { return tag_; }

 private:
  MemoryTracker& tracker_;
  int64_t bytes_;
  std::string tag_;
  void* ptr_ = nullptr;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised contents.
  static Tensor empty(const Shape& shape, DType dtype, MemoryTracker& tracker, const std::string& tag);
  static Tensor zeros(const Shape& shape, DType dtype, MemoryTracker& tracker, const std::string& tag);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i < 0 ? i + ndim() : i)); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  int64_t nbytes() const { return numel() * dtype_size(dtype_); }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  // Its tracker's stream: zero_() and copy_from() are ordered on it.
  Stream stream() const { return storage_ ? storage_->stream() : Stream{}; }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  template <typename T>
  T* data() const {
    PF_REQUIRE(ValueError, dtype_of<T>::value == dtype_,
               "tensor holds " << dtype_name(dtype_) << ", accessed as " << dtype_name(dtype_of<T>::value));
    return static_cast<T*>(raw());
  }

  // Same storage, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) along the first dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  void zero_();
  // Copies contents from `src` (same dtype and numel), across devices if
  // needed, on the stream of the device side (this tensor's when both are).
  void copy_from(const Tensor& src);

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
};

}  // namespace pf
