// A table of row spans for a kernel call over pieces of rows (packed samples,
// family members): call head i covers rows [row0, row0 + len) of buffers laid
// out as rows, and `head` names the slot it belongs to (FAVOR+: its
// projection and dW slot). Kept on the host (spans()) and, for the kernels,
// in ctx.device's memory (table(): [count][3] int64 row0, len, head).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/exec.h"
#include "runtime/hd.h"
#include "runtime/tensor.h"

namespace pf {

struct RowSpan {
  int64_t row0 = 0;
  int64_t len = 0;
  int64_t head = 0;
};

// Call head h of a table [count][3] (row0, len, head) or, without one
// (null), of uniform heads of n rows: rows [h n, (h + 1) n), slot h. For
// kernels and host code alike.
PF_HD RowSpan span_of(const int64_t* table, int64_t h, int64_t n) {
  if (!table) return RowSpan{h * n, n, h};
  return RowSpan{table[3 * h], table[3 * h + 1], table[3 * h + 2]};
}

class RowSpans {
 public:
  // The table in ctx.device's memory from ctx.tracker (required), written on
  // ctx.stream and released in its order like every temporary, so the object
  // may go as soon as the calls that use it are queued. ValueError naming the
  // piece for a negative row0, len or head.
  RowSpans(const ExecContext& ctx, std::vector<RowSpan> spans);
  const std::vector<RowSpan>& spans() const { return spans_; }
  int64_t count() const { return static_cast<int64_t>(spans_.size()); }
  int64_t longest() const { return longest_; }
  int64_t slots() const { return slots_; }  // the largest head + 1
  int64_t end() const { return end_; }      // the rows the spans reach: the largest row0 + len
  // [count, 3] int64 (row0, len, head) on the device of the context.
  const int64_t* table() const { return table_; }

 private:
  std::vector<RowSpan> spans_;
  Tensor device_;
  const int64_t* table_ = nullptr;
  int64_t longest_ = 0, slots_ = 0, end_ = 0;
};

}  // namespace pf
