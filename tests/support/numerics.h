// Shared test helpers: relative L2 error and seeded random fills.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/random.h"

namespace pf::test {

template <typename A, typename B>
double rel_l2(const A* got, const B* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    num += (g - w) * (g - w);
    den += w * w;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

template <typename A, typename B>
double rel_l2(const std::vector<A>& got, const std::vector<B>& want) {
  return rel_l2(got.data(), want.data(), static_cast<int64_t>(std::min(got.size(), want.size())));
}

template <typename B>
double l2_norm(const std::vector<B>& v) {
  double s = 0;
  for (const B& x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return std::sqrt(s);
}

// Relative L2 error; where the reference is exactly zero (softmax attention's
// dQ and dK when every row sees one key, n = 1) any rounding residue would
// give a huge ratio, so the error is taken relative to `fallback_norm` (the
// norm of a tensor of the same scale, such as dV).
template <typename A, typename B>
double rel_l2_or(const std::vector<A>& got, const std::vector<B>& want, double fallback_norm) {
  if (l2_norm(want) > 0) return rel_l2(got, want);
  return l2_norm(got) / fallback_norm;
}

// Standard normal values scaled by `scale`, keyed by (seed, stream).
inline std::vector<double> normal_vector(int64_t n, uint64_t seed, uint64_t stream = 0, double scale = 1.0) {
  return keyed_normals<double>(n, seed, stream, 0x7e57, scale);
}

template <typename T>
std::vector<T> cast_vector(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The float64 inputs of an attention problem set to its float32 ones, so
// that the reference sees exactly what the kernel sees (q, k, v, dout, W).
template <typename Problem>
void reference_sees_float_inputs(Problem& pr) {
  pr.qd.assign(pr.q.begin(), pr.q.end());
  pr.kd.assign(pr.k.begin(), pr.k.end());
  pr.vd.assign(pr.v.begin(), pr.v.end());
  pr.doutd.assign(pr.dout.begin(), pr.dout.end());
  pr.Wd.assign(pr.W.begin(), pr.W.end());
}

}  // namespace pf::test
