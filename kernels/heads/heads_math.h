// Index map shared by the CPU and CUDA head moves: element e of the per-head
// layout [G, B, H, n, D] and its place in the row layout [B, n, G, H, D].
#pragma once

#include <cstdint>

#include "runtime/hd.h"

namespace pf {

PF_HD int64_t heads_row_index(int64_t e, int64_t G, int64_t B, int64_t H, int64_t n, int64_t D) {
  const int64_t dd = e % D;
  int64_t r = e / D;
  const int64_t i = r % n;
  r /= n;
  const int64_t h = r % H;
  r /= H;
  const int64_t b = r % B;
  const int64_t g = r / B;
  return (((b * n + i) * G + g) * H + h) * D + dd;
}

}  // namespace pf
