// Chunks filtered on worker threads, stored with H5Dwrite_chunk: see
// h5_direct_appender.h.
#include "data/h5_direct_appender.h"

#include <algorithm>
#include <sstream>

#include "data/h5_filters.h"

namespace pf {

namespace {
// Pending chunks per worker (and one for the caller) before append() waits:
// bounds the memory held by chunks in flight.
constexpr size_t kPendingPerThread = 4;
}  // namespace

H5DirectAppender::H5DirectAppender(hid_t loc, const std::string& name, hid_t type, const H5Layout& layout,
                                   TaskPool* pool)
    : name_(name), layout_(layout), pool_(pool) {
  PF_REQUIRE(ValueError, layout.chunk > 0, "appendable dataset '" << name << "' needs a chunk size");
  PF_REQUIRE(ValueError, pool != nullptr, "dataset '" << name << "': no task pool for its filters");
  element_bytes_ = H5Tget_size(type);
  PF_REQUIRE(ValueError, element_bytes_ > 0 && H5Tis_variable_str(type) <= 0,
             "dataset '" << name << "': chunks can be written directly only for fixed-size types");
  chunk_bytes_ = element_bytes_ * static_cast<size_t>(layout.chunk);
  // The filters in the order H5Appender's layout sets them (Fletcher-32, then
  // deflate), which is the order h5_filter_chunk applies them.
  dset_ = h5_create_appendable(loc, name, type, layout);
  partial_.reserve(chunk_bytes_);
}

void H5DirectAppender::append(const void* data, int64_t count) {
  PF_REQUIRE(ValueError, !finished_, "dataset '" << name_ << "': append after finish");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t bytes = static_cast<size_t>(count) * element_bytes_;
  while (bytes > 0) {
    const size_t take = std::min(bytes, chunk_bytes_ - partial_.size());
    partial_.insert(partial_.end(), p, p + take);
    p += take;
    bytes -= take;
    size_ += static_cast<int64_t>(take / element_bytes_);  // a chunk holds whole elements
    if (partial_.size() == chunk_bytes_) {
      std::vector<uint8_t> full;
      full.reserve(chunk_bytes_);
      full.swap(partial_);
      submit_chunk(std::move(full));
      // Behind the workers: this thread filters (or waits) until half the
      // allowance is left, then goes back to its own work.
      const size_t limit = kPendingPerThread * static_cast<size_t>(pool_->workers() + 1);
      if (pending_.size() > limit) store_ready(true, limit / 2);
    }
  }
  store_ready(false);
}

void H5DirectAppender::submit_chunk(std::vector<uint8_t> raw) {
  const H5Layout layout = layout_;
  pending_.push_back(
      pool_->submit([raw = std::move(raw), layout] { return h5_filter_chunk(raw.data(), raw.size(), layout); }));
}

void H5DirectAppender::store_ready(bool all, size_t keep) {
  while (!pending_.empty()) {
    std::future<std::vector<uint8_t>>& f = pending_.front();
    if (!all && f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    if (all && pending_.size() <= keep) return;
    const std::vector<uint8_t> stored = pool_->get_on_caller(f);
    pending_.pop_front();
    const int64_t first = chunks_stored_ * layout_.chunk;
    const int64_t end = std::min(size_, first + layout_.chunk);
    if (extent_ < end) {
      const hsize_t dims = static_cast<hsize_t>(end);
      PF_H5_CHECK_MSG(H5Dset_extent(dset_, &dims), "extending '" << name_ << "' to " << end);
      extent_ = end;
    }
    const hsize_t offset = static_cast<hsize_t>(first);
    PF_H5_CHECK_MSG(H5Dwrite_chunk(dset_, H5P_DEFAULT, 0, &offset, stored.size(), stored.data()),
                    "writing chunk " << chunks_stored_ << " of '" << name_ << "'");
    ++chunks_stored_;
  }
}

void H5DirectAppender::finish() {
  if (finished_) return;
  if (!partial_.empty()) {
    partial_.resize(chunk_bytes_, 0);  // HDF5's fill value beyond the end
    std::vector<uint8_t> last;
    last.swap(partial_);
    submit_chunk(std::move(last));
  }
  store_ready(true);
  finished_ = true;
}

}  // namespace pf
