#include "runtime/host_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/check.h"
#include "runtime/memory.h"

namespace pf {
namespace {

int64_t page_bytes() {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? page : 4096;
}

void* map_block(int64_t bytes) {
  void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

HostPool::~HostPool() {
  // Blocks still in use are left mapped: unmapping them would turn a
  // tensor that outlived its tracker into a crash far from the cause.
  for (const Block& b : kept_) unmap(b);
}

void HostPool::unmap(const Block& b) { ::munmap(b.ptr, static_cast<size_t>(b.bytes)); }

void* HostPool::take(int64_t bytes, int64_t bound) {
  PF_REQUIRE(ValueError, host_pool_takes(bytes),
             "host pool block of " << bytes << " bytes; blocks start at " << kHostPoolMinBytes);
  const int64_t page = page_bytes();
  const int64_t want = (bytes + page - 1) / page * page;
  std::lock_guard<std::mutex> lock(mu_);
  // A kept block of the same pages, the one kept longest.
  const auto same = std::find_if(kept_.begin(), kept_.end(), [&](const Block& b) { return b.bytes == want; });
  if (same != kept_.end()) {
    const Block b = *same;
    kept_.erase(same);
    stats_.kept_bytes -= b.bytes;
    stats_.in_use_bytes += b.bytes;
    in_use_[b.ptr] = b.bytes;
    ++stats_.reuses;
    return b.ptr;
  }
  // Room under the bound, beyond the whole pages of every block.
  const int64_t limit = bound + static_cast<int64_t>(in_use_.size() + 1) * page;
  size_t drop = 0;
  int64_t kept = stats_.kept_bytes;
  while (drop < kept_.size() && stats_.in_use_bytes + kept + want > limit) kept -= kept_[drop++].bytes;
  for (size_t i = 0; i < drop; ++i) unmap(kept_[i]);
  kept_.erase(kept_.begin(), kept_.begin() + static_cast<int64_t>(drop));
  stats_.kept_bytes = kept;
  void* p = map_block(want);
  if (!p && !kept_.empty()) {  // short of memory: give back every kept block and try once more
    for (const Block& b : kept_) unmap(b);
    kept_.clear();
    stats_.kept_bytes = 0;
    p = map_block(want);
  }
  PF_REQUIRE(MemoryError, p != nullptr,
             "host allocation of " << format_bytes(bytes) << " failed (" << format_bytes(stats_.in_use_bytes)
                                   << " of large blocks in use)");
  in_use_[p] = want;
  stats_.in_use_bytes += want;
  ++stats_.maps;
  return p;
}

void HostPool::retire(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = in_use_.find(ptr);
  PF_REQUIRE(ValueError, it != in_use_.end(), "host pool asked to retire a block it did not hand out");
  retired_[ptr] = it->second;
  stats_.in_use_bytes -= it->second;
  stats_.retired_bytes += it->second;
  in_use_.erase(it);
}

void HostPool::give(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t bytes = 0;
  if (const auto it = retired_.find(ptr); it != retired_.end()) {
    bytes = it->second;
    stats_.retired_bytes -= bytes;
    retired_.erase(it);
  } else {
    const auto used = in_use_.find(ptr);
    PF_REQUIRE(ValueError, used != in_use_.end(), "host pool given a block it did not hand out");
    bytes = used->second;
    stats_.in_use_bytes -= bytes;
    in_use_.erase(used);
  }
  kept_.push_back(Block{ptr, bytes});
  stats_.kept_bytes += bytes;
}

HostPool::Stats HostPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace pf
