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
//                     2^-126), NaN propagates. Branch-free (integer masks
//                     at the edges), shared by host and device code.
//   exp_core_f32(x)   its polynomial core for x already in range (softmax_exp
//                     clamps its own way and uses it too).
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

// The bits of a float and back (bit casts on the device, memcpy on the host).
PF_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}
PF_HD float bits_f32(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The Cephes core of exp: for x in [-87.34, 88.38] (n = round(x / ln 2) in
// [-126, 127]), y(r) 2^n with x = n ln 2 + r. Outside that range the result
// is garbage, and callers mask it.
PF_HD float exp_core_f32(float x) {
  // round(x / ln 2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold
  // the rounded integer, and subtracting the constant back gives it as a float.
  const float shifted = x * 1.44269504088896341f + 12582912.f;
  const float fn = shifted - 12582912.f;
  const uint32_t n_biased = f32_bits(shifted) - 0x4B400000u + 127u;  // n + 127
  const float r = (x - fn * 0.693359375f) + fn * 2.12194440e-4f;      // ln 2 split in two for an exact reduction
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  return y * bits_f32(n_biased << 23);
}

// exp(v) for every float (see the top of the file). No float compares: GCC
// keeps a float select as a branch, which stops a loop from vectorising on
// AVX2 and the baseline, so the edges are integer masks on the bits of v.
PF_HD float exp_f32(float v) {
  const uint32_t b = f32_bits(v);
  const uint32_t nan = 0u - static_cast<uint32_t>((b & 0x7FFFFFFFu) > 0x7F800000u);
  // As unsigned, exactly the floats below -87.33654 (and -inf) have patterns above it.
  const uint32_t under = 0u - static_cast<uint32_t>(b > 0xC2AEAC4Fu);
  // As signed, exactly the floats above 88 (and +inf) have patterns above it.
  const uint32_t over = 0u - static_cast<uint32_t>(static_cast<int32_t>(b) > 0x42B00000);
  const uint32_t value = f32_bits(exp_core_f32(v)) & ~(under | over);
  return bits_f32(((value | (0x7F800000u & over)) & ~nan) | ((b | 0x00400000u) & nan));
}

}  // namespace pf
