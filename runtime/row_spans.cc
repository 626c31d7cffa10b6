// RowSpans (row_spans.h): the host spans, checked, and their device table.
#include "runtime/row_spans.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/check.h"
#include "runtime/memory.h"

namespace pf {

RowSpans::RowSpans(const ExecContext& ctx, std::vector<RowSpan> spans) : spans_(std::move(spans)) {
  std::vector<int64_t> host;
  host.reserve(3 * spans_.size());
  for (size_t i = 0; i < spans_.size(); ++i) {
    const RowSpan& x = spans_[i];
    PF_REQUIRE(ValueError, x.row0 >= 0 && x.len >= 0 && x.head >= 0,
               "pieces: piece " << i << " has row0=" << x.row0 << " len=" << x.len << " head=" << x.head
                                << "; each must be >= 0");
    host.insert(host.end(), {x.row0, x.len, x.head});
    longest_ = std::max(longest_, x.len);
    slots_ = std::max(slots_, x.head + 1);
    end_ = std::max(end_, x.row0 + x.len);
  }
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "pieces: a pieces table needs ctx.tracker");
  device_ = Tensor::empty({std::max<int64_t>(static_cast<int64_t>(host.size()), 1)}, DType::i64, *ctx.tracker,
                          "pieces.table");
  const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(int64_t));
  if (ctx.device.is_cpu()) {
    // Fresh host memory no queued work uses yet: written at once.
    if (bytes > 0) std::memcpy(device_.raw(), host.data(), static_cast<size_t>(bytes));
  } else {
    // CUDA has staged pageable memory when the asynchronous copy returns.
    copy_bytes(ctx.stream, device_.raw(), ctx.device, host.data(), Device::cpu(), bytes);
  }
  table_ = device_.data<int64_t>();
}

}  // namespace pf
