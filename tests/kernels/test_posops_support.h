// Helpers for the position-wise op tests: paired fp32/fp64 random buffers (the
// fp64 copy holds exactly the fp32 values, so a comparison measures the
// kernel, not the input rounding), random token ids, and a central-difference
// gradient check in float64.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/random.h"
#include "tests/support/numerics.h"

namespace pf::test {

struct Pair {
  std::vector<float> f;
  std::vector<double> d;
};

inline Pair random_pair(int64_t n, uint64_t seed, uint64_t stream, double scale = 1.0, double shift = 0.0) {
  // The values of normal_vector(n, seed, stream, scale) + shift; the draws are
  // keyed, so every thread makes the same ones (the GPU tests take ~1e9).
  const KeyedRandom rng(seed, stream, 0x7e57);
  Pair p;
  p.f.resize(static_cast<size_t>(n));
  p.d.resize(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < (n + 1) / 2; ++k) {
    double z[2];
    rng.normal2(static_cast<uint64_t>(k), &z[0], &z[1]);
    for (int64_t j = 0; j < 2 && 2 * k + j < n; ++j) {
      const int64_t i = 2 * k + j;
      p.f[i] = static_cast<float>(scale * z[j] + shift);
      p.d[i] = p.f[i];
    }
  }
  return p;
}

// Ids uniform in [0, V), keyed by (seed, stream).
inline std::vector<int32_t> random_ids(int64_t T, int64_t V, uint64_t seed, uint64_t stream) {
  KeyedRandom rng(seed, stream, 0x1d5);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>(rng.draw(static_cast<uint64_t>(t)).v[0] % V);
  return ids;
}

// Central differences of the scalar `loss` with respect to x at up to
// `max_checks` evenly spread indices, compared with `analytic` by relative L2.
inline double fd_gradient_error(std::vector<double>& x, const std::vector<double>& analytic,
                                const std::function<double()>& loss, int64_t max_checks = 64) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t stride = n > max_checks ? n / max_checks : 1;
  std::vector<double> num, ana;
  for (int64_t i = 0; i < n; i += stride) {
    const double x0 = x[i], h = 1e-6 * std::max(1.0, std::fabs(x0));
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    num.push_back((lp - lm) / (2 * h));
    ana.push_back(analytic[i]);
  }
  return rel_l2(num, ana);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace pf::test
