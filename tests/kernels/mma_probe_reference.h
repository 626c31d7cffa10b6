// Inputs and float64 references of the mma probes (tests/kernels/mma_probe_cuda.cuh),
// shared by the emulated and the GPU test.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <random>
#include <vector>

namespace pf::mma_probe {

// The value a tf32 operand holds: round to nearest, ties away, 10 mantissa bits.
inline double tf32_value(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x1000u) & 0xffffe000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// bf16 bits of x, round to nearest even (finite x), and the value they hold.
inline uint16_t bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t lower = bits & 0xffffu, upper = bits >> 16;
  const bool up = lower > 0x8000u || (lower == 0x8000u && (upper & 1u));
  return static_cast<uint16_t>(upper + (up ? 1u : 0u));
}
inline double bf16_value(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Random values spread over `decades` powers of ten, either sign.
inline std::vector<float> random_values(std::mt19937_64& rng, size_t n, int decades) {
  std::uniform_real_distribution<double> mant(0.5, 1.0), exp10(-decades / 2.0, decades / 2.0);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>((sign(rng) ? -1 : 1) * mant(rng) * std::pow(10.0, exp10(rng)));
  return v;
}

struct Product {
  std::vector<double> d;      // [16, 8] float64 reference
  std::vector<double> scale;  // [16, 8] sum |a b| + |c|, the size of an fp32 rounding
};

// D = A B + C in float64 over the operands' values as `value` gives them.
template <typename ValueA, typename ValueB>
Product reference(int K, const ValueA& a, const ValueB& b, const std::vector<float>& C) {
  Product p{std::vector<double>(128), std::vector<double>(128)};
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = C[static_cast<size_t>(i * 8 + j)], m = std::fabs(s);
      for (int k = 0; k < K; ++k) {
        s += a(i, k) * b(k, j);
        m += std::fabs(a(i, k) * b(k, j));
      }
      p.d[static_cast<size_t>(i * 8 + j)] = s;
      p.scale[static_cast<size_t>(i * 8 + j)] = m;
    }
  return p;
}

// The largest |D - reference| in units of scale (an fp32 sum of K + 1 terms
// is within about (K + 1) 2^-24 of them); NaN when D holds one.
inline double worst_error(const std::vector<float>& D, const Product& p) {
  double worst = 0;
  for (size_t i = 0; i < D.size(); ++i) {
    if (std::isnan(D[i])) return NAN;
    worst = std::max(worst, std::fabs(D[i] - p.d[i]) / p.scale[i]);
  }
  return worst;
}

// The inputs of one probe run.
struct Inputs {
  std::vector<float> A, B, C;  // tf32: A [16, 8], B [8, 8]; bf16: A [16, 16], B [16, 8]; C [16, 8]
  std::vector<uint16_t> A16, B16;
  Product want;
};

inline Inputs tf32_inputs(uint64_t seed, int decades) {
  std::mt19937_64 rng(seed);
  Inputs in;
  in.A = random_values(rng, 128, decades);
  in.B = random_values(rng, 64, decades);
  in.C = random_values(rng, 128, decades);
  in.want = reference(
      8, [&](int i, int k) { return tf32_value(in.A[static_cast<size_t>(i * 8 + k)]); },
      [&](int k, int j) { return tf32_value(in.B[static_cast<size_t>(k * 8 + j)]); }, in.C);
  return in;
}

inline Inputs bf16_inputs(uint64_t seed, int decades) {
  std::mt19937_64 rng(seed);
  Inputs in;
  in.A = random_values(rng, 256, decades);
  in.B = random_values(rng, 128, decades);
  in.C = random_values(rng, 128, decades);
  for (float x : in.A) in.A16.push_back(bf16_bits(x));
  for (float x : in.B) in.B16.push_back(bf16_bits(x));
  in.want = reference(
      16, [&](int i, int k) { return bf16_value(in.A16[static_cast<size_t>(i * 16 + k)]); },
      [&](int k, int j) { return bf16_value(in.B16[static_cast<size_t>(k * 8 + j)]); }, in.C);
  return in;
}

}  // namespace pf::mma_probe
