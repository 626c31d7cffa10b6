#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/hd.h"

namespace pf {

// pe(position)[c] for width C.
PF_HD float sinusoidal_value(int64_t position, int64_t c, int64_t C) {
  const double freq = exp(-log(10000.0) * static_cast<double>(c - (c & 1)) / static_cast<double>(C));
  const double angle = static_cast<double>(position) * freq;
  return static_cast<float>((c & 1) ? cos(angle) : sin(angle));
}

}  // namespace pf
