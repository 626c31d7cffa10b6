// performer-bench softmax: exact (tiled) softmax attention on the CPU,
// forward and backward, causal and bidirectional, per sequence length n at
// fixed B, H, d ([B, H, n, d] fp32). FLOP counts per head (GEMM work only,
// exps not counted): forward 4 n^2 d (S = Q K^T and P V), backward
// 10 n^2 d (S recomputed, dV, dP, dQ, dK); causal counts half of each.
// Each GFLOP/s figure is also given as a fraction of the sgemm peak measured
// at the start of the same run.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "kernels/softmax_attention/softmax_attention.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/timing.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<float> random_normal(int64_t size, uint64_t stream) { return keyed_normals<float>(size, 2024, stream, 0); }

}  // namespace

int run_softmax(int argc, char** argv) {
  CLI::App app{"exact softmax attention (CPU), forward + backward"};
  std::vector<int64_t> sizes{1024, 2048, 4096, 8192, 16384};
  int64_t batch = 1, heads = 8, dim = 64, q_tile = SoftmaxAttentionParams{}.q_tile,
          k_tile = SoftmaxAttentionParams{}.k_tile;
  int reps = 1;
  app.add_option("--sizes", sizes, "sequence lengths n")->check(pf::positive_number());
  app.add_option("--batch", batch, "B")->check(pf::positive_number());
  app.add_option("--heads", heads, "H")->check(pf::positive_number());
  app.add_option("--dim", dim, "head dimension d")->check(pf::positive_number());
  app.add_option("--q-tile", q_tile, "query-tile rows")->check(pf::positive_number());
  app.add_option("--k-tile", k_tile, "key-tile rows")->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions after one warm-up (best is kept)")->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  const double peak = peak_sgemm_gflops();
  std::fprintf(stderr, "sgemm peak %.1f GFLOP/s on %d threads\n", peak, omp_get_max_threads());
  std::printf(
      "mode,n,batch,heads,d,threads,fwd_s,bwd_s,fwd_gflops,bwd_gflops,fwd_fraction,bwd_fraction,fwd_bwd_s,"
      "tokens_per_s,gflops,fraction_of_peak,peak_sgemm_gflops\n");
  for (int64_t n : sizes) {
    const int64_t size = batch * heads * n * dim;
    const auto Q = random_normal(size, 1), K = random_normal(size, 2), V = random_normal(size, 3),
               dO = random_normal(size, 4);
    std::vector<float> O(size), lse(batch * heads * n), dQ(size), dK(size), dV(size);
    for (bool causal : {true, false}) {
      MemoryTracker softmax_tracker(Device::cpu());
      ExecContext host;  // a synchronous CPU stream: the kernel runs inside the timed call
      host.tracker = &softmax_tracker;
      const SoftmaxAttentionParams p = softmax_attention_tiled_params(batch * heads, n, dim, causal, q_tile, k_tile);
      const double fwd_s = best_seconds(
          [&] { softmax_attention_forward(host, p, Q.data(), K.data(), V.data(), O.data(), lse.data()); }, reps);
      const double bwd_s = best_seconds(
          [&] {
            softmax_attention_backward(host, p, Q.data(), K.data(), V.data(), O.data(), lse.data(), dO.data(), dQ.data(),
                                           dK.data(), dV.data());
          },
          reps);
      const double pairs = static_cast<double>(p.heads) * n * n * (causal ? 0.5 : 1.0);
      const double fwd_gf = 4.0 * pairs * dim * 1e-9, bwd_gf = 10.0 * pairs * dim * 1e-9;
      const double total_s = fwd_s + bwd_s, gflops = (fwd_gf + bwd_gf) / total_s;
      std::printf("%s,%ld,%ld,%ld,%ld,%d,%.4f,%.4f,%.1f,%.1f,%.3f,%.3f,%.4f,%.0f,%.1f,%.3f,%.1f\n",
                  causal ? "causal" : "bidirectional", static_cast<long>(n), static_cast<long>(batch),
                  static_cast<long>(heads), static_cast<long>(dim), omp_get_max_threads(), fwd_s, bwd_s, fwd_gf / fwd_s,
                  bwd_gf / bwd_s, fwd_gf / fwd_s / peak, bwd_gf / bwd_s / peak, total_s, batch * n / total_s, gflops,
                  gflops / peak, peak);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace pf::bench
