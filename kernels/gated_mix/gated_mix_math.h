// The gate of gated_mix.h: s = sigmoid(g), evaluated so that it neither
// overflows nor loses the small side (exp of a non-positive argument only).
#pragma once

#include <math.h>

#include "runtime/hd.h"

namespace pf {

PF_HD float gated_mix_sigmoid(float g) {
  const float e = expf(-fabsf(g));
  return g >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
}

}  // namespace pf
