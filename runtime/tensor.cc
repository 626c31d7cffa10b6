#include "runtime/tensor.h"

#include <sstream>

namespace pf {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    PF_REQUIRE(ValueError, d >= 0, "negative dimension in shape " << shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

Storage::Storage(MemoryTracker& tracker, int64_t bytes, std::string tag)
    : tracker_(tracker), bytes_(bytes), tag_(std::move(tag)) {
  ptr_ = device_allocate(tracker_, bytes_, tag_);
}

Storage::~Storage() { device_free(tracker_, ptr_, bytes_, tag_); }

Tensor Tensor::empty(const Shape& shape, DType dtype, MemoryTracker& tracker, const std::string& tag) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(tracker, shape_numel(shape) * dtype_size(dtype), tag);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, MemoryTracker& tracker, const std::string& tag) {
  Tensor t = empty(shape, dtype, tracker, tag);
  t.zero_();
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  PF_REQUIRE(ValueError, shape_numel(shape) == numel(),
             "cannot reshape " << shape_str(shape_) << " to " << shape_str(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  PF_REQUIRE(ValueError, ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
             "row slice [" << begin << ", " << end << ") of " << shape_str(shape_));
  Tensor t = *this;
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  t.offset_bytes_ += begin * row * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

void Tensor::zero_() {
  if (defined()) fill_zero(stream(), raw(), device(), nbytes());
}

void Tensor::copy_from(const Tensor& src) {
  PF_REQUIRE(ValueError, src.dtype_ == dtype_ && src.numel() == numel(),
             "copy of " << dtype_name(src.dtype_) << shape_str(src.shape_) << " into " << dtype_name(dtype_)
                        << shape_str(shape_));
  copy_bytes(device().is_cuda() || src.device().is_cpu() ? stream() : src.stream(), raw(), device(), src.raw(),
             src.device(), nbytes());
}

}  // namespace pf
