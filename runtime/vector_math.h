// Vectorisable fp32 math for the CPU element loops.
//   PF_VECTOR_CLONES  compiles a function for AVX-512, AVX2 and the x86-64
//                     baseline (GCC function multiversioning); the CPU picks
//                     one at load time, so loops run 16 or 8 lanes wide where
//                     it allows, in a binary that runs on any x86-64.
//   exp_f32(v)        exp(v) without a library call, so that a loop calling
//                     it vectorises: Cephes expf (v = n ln2 + r, |r| <= ln2/2,
//                     a degree-7 polynomial in r, 2^n from exponent bits),
//                     relative error below 3e-7 (tested) for v in
//                     [-87.33, 88]; v > 88 gives +inf (exp(88.72) is the
//                     largest finite fp32 value), v < -87.33 gives 0 (below
//                     2^-126), NaN propagates. Branch-free, shared by host and
//                     device code.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/hd.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__CUDACC__)
#define PF_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PF_VECTOR_CLONES
#endif

namespace pf {

PF_HD float exp_f32(float v) {
  constexpr float kHi = 88.0f, kLo = -87.33654f, kLog2e = 1.44269504088896341f, kRound = 12582912.0f;
  constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;  // ln2 = kC1 + kC2 (kC1 exact in 9 bits)
  const float x = v > kHi ? kHi : (v < kLo ? kLo : v);        // NaN stays NaN
  const float t = x * kLog2e + kRound;                         // round(x log2e) in the low mantissa bits
  const float nf = t - kRound;
  const float r = (x - nf * kC1) - nf * kC2;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  uint32_t tb;
  memcpy(&tb, &t, sizeof(tb));
  const uint32_t sb = (tb + (127u - 0x4B400000u)) << 23;  // 2^n for n in [-126, 127]
  float scale;
  memcpy(&scale, &sb, sizeof(scale));
  float out = y * scale;
  out = v > kHi ? INFINITY : out;
  out = v < kLo ? 0.0f : out;
  return out;
}

}  // namespace pf
