// performer-bench linattn: CPU causal linear attention, forward + backward, at
// B*H heads of n positions (default B=1, H=8, n=16384, d=64, m=256), reported
// in GFLOP/s of the chunked algorithm and as a fraction of the sgemm peak
// (peak_sgemm_gflops) measured in the same run, just before each configuration.
//
// FLOPs per head and position (chunk C, D1 = d+1; the C x C products are
// counted in full, as computed):
//   forward            4 m D1 + 2 C (m + D1)
//   backward sweep 1   4 m D1 + 2 C (m + D1)            (d_phi_q)
//   backward sweep 2   4 m D1 + 2 m d + 2 C (2 m + d)   (d_phi_k, d_v, gradient state)
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/linear_attention/linear_attention.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/timing.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<float> uniform(int64_t count, uint64_t stream, float lo, float hi) {
  KeyedRandom rng(7, stream, 0);
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) out[i] = lo + (hi - lo) * static_cast<float>(rng.uniform(i));
  return out;
}

}  // namespace

int run_linattn(int argc, char** argv) {
  CLI::App app{"CPU causal linear attention forward + backward GFLOP/s"};
  int64_t batch = 1, heads = 8, n = 16384, d = 64, m = 256;
  std::vector<int64_t> chunks{64, 128, 256};
  int reps = 3;
  app.add_option("--batch", batch, "B")->check(pf::positive_number());
  app.add_option("--heads", heads, "H")->check(pf::positive_number());
  app.add_option("-n", n, "positions per sequence")->check(pf::positive_number());
  app.add_option("-d", d, "head dim")->check(pf::positive_number());
  app.add_option("-m", m, "features")->check(pf::positive_number());
  app.add_option("--chunks", chunks, "chunk sizes to time")->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions (best is kept)")->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  const int64_t bh = batch * heads, D1 = d + 1;
  const float top = 1.0f / std::sqrt(static_cast<float>(m));
  const auto pq = uniform(bh * n * m, 1, 0.f, top), pk = uniform(bh * n * m, 2, 0.f, top);
  const auto ck = uniform(bh * n, 3, -5.f, 5.f), v = uniform(bh * n * d, 4, -1.f, 1.f);
  const auto d_o = uniform(bh * n * d, 5, -1.f, 1.f);
  std::vector<float> y(bh * n * D1), L(bh * n), o(bh * n * d), den(bh * n), dq(bh * n * m), dk(bh * n * m),
      dv(bh * n * d);
  const ExecContext ctx;

  std::printf("B,H,n,d,m,chunk,threads,fwd_s,bwd_s,fwd_bwd_s,gflop,gflops,peak_sgemm_gflops,fraction_of_peak\n");
  for (int64_t C : chunks) {
    const LinAttnShape s{bh, n, m, d, C};
    std::vector<float> total(bh * s.state_size()), gtotal(bh * s.state_size());
    auto forward = [&] {
      causal_linear_attention_forward_local(ctx, s, pq.data(), pk.data(), ck.data(), v.data(), y.data(), L.data(),
                                            total.data(), nullptr);
      linear_attention_normalize(ctx, s, y.data(), o.data(), den.data());
    };
    auto backward = [&] {
      causal_linear_attention_backward_local(ctx, s, pq.data(), pk.data(), ck.data(), v.data(), o.data(), den.data(),
                                             L.data(), d_o.data(), dq.data(), dk.data(), dv.data(), gtotal.data(),
                                             nullptr, nullptr);
    };
    // The peak is measured right before each configuration, so that both see
    // the same machine load.
    const double peak = peak_sgemm_gflops();
    const double tf = best_seconds(forward, reps), tb = best_seconds(backward, reps);
    const double per_pos = 12.0 * m * D1 + 2.0 * m * d + 2.0 * C * (4.0 * m + 2.0 * D1 + d);
    const double gflop = per_pos * n * bh * 1e-9, gflops = gflop / (tf + tb);
    std::printf("%ld,%ld,%ld,%ld,%ld,%ld,%d,%.4f,%.4f,%.4f,%.2f,%.1f,%.1f,%.3f\n", static_cast<long>(batch),
                static_cast<long>(heads), static_cast<long>(n), static_cast<long>(d), static_cast<long>(m),
                static_cast<long>(C), omp_get_max_threads(), tf, tb, tf + tb, gflop, gflops, peak, gflops / peak);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace pf::bench
