// Timing helpers for benchmarks: wall-clock seconds, best of N after a warm-up.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace pf::bench {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs `fn` once to warm up, then `reps` times; returns the fastest run.
template <typename F>
double best_seconds(F&& fn, int reps) {
  fn();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    fn();
    const double t = now_seconds() - t0;
    if (t < best) best = t;
  }
  return best;
}

// sgemm GFLOP/s of this build's CPU backend at n^3, measured now: the
// denominator of every "fraction of peak" figure.
double peak_sgemm_gflops(int64_t n = 2048);

}  // namespace pf::bench
