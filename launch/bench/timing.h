// Timing helpers for benchmarks: best of N after a warm-up, on seconds_now()
// (runtime/clock.h), the trainer's own clock.
#pragma once

#include <cstdint>
#include <limits>

#include "runtime/clock.h"
#include "runtime/exec.h"

namespace pf::bench {

// Runs `fn` once to warm up, then `reps` times; returns the fastest run.
template <typename F>
double best_seconds(F&& fn, int reps) {
  fn();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const double t0 = seconds_now();
    fn();
    const double t = seconds_now() - t0;
    if (t < best) best = t;
  }
  return best;
}

// sgemm GFLOP/s of this build's CPU backend at n^3, measured now: the
// denominator of every "fraction of peak" figure.
double peak_sgemm_gflops(int64_t n = 2048);
// The same on ctx's device (cuBLAS on a GPU, with tensors from ctx.tracker).
double device_sgemm_gflops(const ExecContext& ctx, int64_t n);

}  // namespace pf::bench
