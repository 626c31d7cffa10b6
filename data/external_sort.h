// Sorting more fixed-size records than fit in a memory budget: records are
// buffered up to the budget; each full buffer is sorted and written to a run
// file in a scratch folder (created on the first spill); after finish(),
// next() returns every record in order by a k-way merge of the runs (in
// several levels when more runs exist than read buffers of 64 KiB fit in the
// budget). When everything fits in one buffer nothing touches the disk.
// Memory: the budget (the buffer, or the merge's read buffers), whatever the
// number of records. Every write is checked: IoError naming the run file and
// the reason (a full disk among them). T must be trivially copyable.
// A poll callback, when set, is called every kPollEvery records the merges
// and next() pass along: a long merge stops as soon as it throws, and the
// run files are removed with the sorter.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/check.h"

namespace pf {

template <typename T, typename Less = std::less<T>>
class ExternalSorter {
  static_assert(std::is_trivially_copyable_v<T>, "records are written to disk as bytes");

 public:
  // folder(): the scratch folder for run files, asked for on the first spill
  // (the caller creates and removes it); prefix names the run files.
  ExternalSorter(std::function<std::string()> folder, std::string prefix, int64_t budget_bytes)
      : folder_(std::move(folder)), prefix_(std::move(prefix)), budget_(budget_bytes) {
    PF_REQUIRE(ValueError, budget_bytes >= kMinBudget,
               "sort budget of " << budget_bytes << " bytes is below the minimum of " << kMinBudget);
    capacity_ = static_cast<size_t>(budget_bytes) / sizeof(T);
  }
  ~ExternalSorter() {
    for (Run& r : open_) close_run(r);
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  ExternalSorter(const ExternalSorter&) = delete;
  ExternalSorter& operator=(const ExternalSorter&) = delete;

  static constexpr int64_t kPollEvery = 1 << 16;
  void set_poll(std::function<void()> poll) { poll_ = std::move(poll); }

  void add(const T& record) {
    if (buffer_.size() == capacity_) spill();
    if (buffer_.capacity() == 0) buffer_.reserve(capacity_);
    buffer_.push_back(record);
    ++records_;
  }
  // Ends the input; merges down to runs that fit the budget's read buffers.
  void finish() {
    std::sort(buffer_.begin(), buffer_.end(), Less());
    if (paths_.empty()) return;  // all in memory
    if (!buffer_.empty()) spill();
    std::vector<T>().swap(buffer_);
    const size_t fan_in = std::max<size_t>(2, static_cast<size_t>(budget_ / kReadBlock) - 1);
    while (paths_.size() > fan_in) {
      std::vector<std::string> group(paths_.begin(), paths_.begin() + static_cast<std::ptrdiff_t>(fan_in));
      const std::string out = next_run_path();
      paths_.push_back(out);  // removed by the destructor from now on, like the group
      open_merge(group);
      OpenFile f{open_file(out, "wb")};
      T r;
      while (pop(r)) write_records(f.file, out, &r, 1);
      close_file(f.release(), out);
      for (const std::string& p : group) std::remove(p.c_str());
      paths_.erase(paths_.begin(), paths_.begin() + static_cast<std::ptrdiff_t>(fan_in));
    }
    open_merge(paths_);
  }
  // The next record in order; false after the last.
  bool next(T& out) {
    if (paths_.empty()) {
      if (pos_ == buffer_.size()) return false;
      tick();
      out = buffer_[pos_++];
      return true;
    }
    return pop(out);
  }
  int64_t records() const { return records_; }
  int64_t runs_written() const { return runs_written_; }

 private:
  static constexpr int64_t kMinBudget = 64 << 10;
  static constexpr int64_t kReadBlock = 64 << 10;

  struct Run {
    std::string path;
    FILE* file = nullptr;
    std::vector<T> block;
    size_t pos = 0;
  };
  struct Head {
    T record;
    size_t run;
  };
  struct HeadAfter {  // min-heap order; equal records leave in run order
    bool operator()(const Head& a, const Head& b) const {
      if (Less()(b.record, a.record)) return true;
      if (Less()(a.record, b.record)) return false;
      return a.run > b.run;
    }
  };

  std::string next_run_path() {
    if (folder_path_.empty()) folder_path_ = folder_();
    return folder_path_ + "/" + prefix_ + "-" + std::to_string(run_counter_++) + ".run";
  }
  static FILE* open_file(const std::string& path, const char* mode) {
    FILE* f = std::fopen(path.c_str(), mode);
    PF_REQUIRE(IoError, f != nullptr, "cannot open the scratch file '" << path << "': " << std::strerror(errno));
    return f;
  }
  // Closes the file unless released (an error or a stop on the way).
  struct OpenFile {
    FILE* file;
    ~OpenFile() {
      if (file) std::fclose(file);
    }
    FILE* release() { return std::exchange(file, nullptr); }
  };
  static void write_records(FILE* f, const std::string& path, const T* r, size_t n) {
    PF_REQUIRE(IoError, n == 0 || std::fwrite(r, sizeof(T), n, f) == n,
               "cannot write the scratch file '" << path << "': " << std::strerror(errno));
  }
  void tick() {
    if (poll_ && ++passed_ % kPollEvery == 0) poll_();
  }
  static void close_file(FILE* f, const std::string& path) {
    const bool ok = std::fflush(f) == 0 && std::ferror(f) == 0;
    const int err = errno;
    PF_REQUIRE(IoError, std::fclose(f) == 0 && ok,
               "cannot write the scratch file '" << path << "': " << std::strerror(err));
  }
  static void close_run(Run& r) {
    if (r.file) std::fclose(r.file);
    r.file = nullptr;
  }
  void spill() {
    std::sort(buffer_.begin(), buffer_.end(), Less());
    const std::string path = next_run_path();
    OpenFile f{open_file(path, "wb")};
    paths_.push_back(path);
    write_records(f.file, path, buffer_.data(), buffer_.size());
    close_file(f.release(), path);
    buffer_.clear();
    ++runs_written_;
  }
  bool refill(Run& r) {
    r.block.resize(r.block.capacity());
    const size_t n = std::fread(r.block.data(), sizeof(T), r.block.size(), r.file);
    PF_REQUIRE(IoError, n > 0 || !std::ferror(r.file),
               "cannot read the scratch file '" << r.path << "': " << std::strerror(errno));
    r.block.resize(n);
    r.pos = 0;
    return n > 0;
  }
  void open_merge(const std::vector<std::string>& paths) {
    for (Run& r : open_) close_run(r);
    open_.clear();
    heap_ = decltype(heap_)();
    const size_t per_run = std::max<size_t>(1, static_cast<size_t>(budget_) / (paths.size() + 1) / sizeof(T));
    open_.resize(paths.size());
    for (size_t k = 0; k < paths.size(); ++k) {
      Run& r = open_[k];
      r.path = paths[k];
      r.file = open_file(r.path, "rb");
      r.block.reserve(per_run);
      if (refill(r)) heap_.push({r.block[r.pos++], k});
    }
  }
  bool pop(T& out) {
    if (heap_.empty()) return false;
    tick();
    const Head h = heap_.top();
    heap_.pop();
    out = h.record;
    Run& r = open_[h.run];
    if (r.pos < r.block.size() || refill(r)) heap_.push({r.block[r.pos++], h.run});
    return true;
  }

  std::function<std::string()> folder_;
  std::string prefix_, folder_path_;
  int64_t budget_;
  size_t capacity_ = 0, pos_ = 0;
  std::vector<T> buffer_;
  std::vector<std::string> paths_;
  std::vector<Run> open_;
  std::priority_queue<Head, std::vector<Head>, HeadAfter> heap_;
  int64_t records_ = 0, runs_written_ = 0, run_counter_ = 0, passed_ = 0;
  std::function<void()> poll_;
};

}  // namespace pf
