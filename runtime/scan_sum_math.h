// Per-element math of the built-in sum combine, shared by the host and CUDA
// versions: out[i] = earlier[i] + later[i] over flat buffers of n elements.
#pragma once

#include <cstdint>

#include "runtime/hd.h"

namespace pf {

template <typename T>
PF_HD void scan_sum_element(const T* earlier, const T* later, T* out, int64_t i) {
  out[i] = earlier[i] + later[i];
}

}  // namespace pf
