// Per-element math of the segmented combine (make_segmented_combine in
// runtime/scan.h), shared by the host and CUDA versions. A segmented value is
// a flag followed by one value of the inner combine, g elements, so granule j
// of a buffer starts at j (g + 1):
//   (A, f) (+) (B, h) = (h ? B : A (+) B, f or h)
// `combined` holds A (+) B of every granule contiguously ([granules, g]).
#pragma once

#include <cstdint>

#include "runtime/hd.h"

namespace pf {

// Element e of granule j: out's value = later's flag ? later's value : combined.
template <typename T>
PF_HD void segment_value_element(const T* later, const T* combined, T* out, int64_t g, int64_t j, int64_t e) {
  const T* lj = later + j * (g + 1);
  out[j * (g + 1) + 1 + e] = lj[0] != T(0) ? lj[1 + e] : combined[j * g + e];
}

// The flag of granule j: either flag. Run after every segment_value_element,
// since `out` may alias `later`, whose flags those read.
template <typename T>
PF_HD void segment_flag_element(const T* earlier, const T* later, T* out, int64_t g, int64_t j) {
  out[j * (g + 1)] = (earlier[j * (g + 1)] != T(0) || later[j * (g + 1)] != T(0)) ? T(1) : T(0);
}

}  // namespace pf
