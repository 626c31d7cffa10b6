// performer-bench posops: CPU time of each position-wise op at a model shape
// (T tokens of width C, FFN width 4C, vocabulary V): GB/s of the bytes each op
// must move for the memory-bound ops, GFLOP/s and the fraction of the sgemm
// peak measured in the same run for the linear layer.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/embedding/embedding.h"
#include "kernels/gelu/gelu.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/reduce/reduce.h"
#include "kernels/residual/residual.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/device_buffers.h"
#include "launch/bench/timing.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<float> filled(int64_t n, uint64_t stream, float scale = 1.f) { return keyed_uniform(n, 1234, stream, scale); }

}  // namespace

int run_posops(int argc, char** argv) {
  CLI::App app{"CPU position-wise ops: GB/s (memory-bound ops) and GFLOP/s (linear)"};
  int64_t T = 8192, C = 512, V = 30;
  int reps = 5;
  app.add_option("--tokens", T, "tokens T (rows)")->check(pf::positive_number());
  app.add_option("--width", C, "model width C (FFN width 4C)")->check(pf::positive_number());
  app.add_option("--vocab", V, "vocabulary size V")->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions (best is kept)")->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  ExecContext ctx;
  const int64_t H = 4 * C;
  const double peak = peak_sgemm_gflops();
  std::printf("op,pass,T,C,V,threads,seconds,metric,value,fraction_of_sgemm_peak\n");
  auto report = [&](const char* op, const char* pass, double s, const char* metric, double value, double frac) {
    std::printf("%s,%s,%ld,%ld,%ld,%d,%.6f,%s,%.2f,", op, pass, static_cast<long>(T), static_cast<long>(C),
                static_cast<long>(V), omp_get_max_threads(), s, metric, value);
    if (frac >= 0) std::printf("%.3f\n", frac);
    else std::printf("\n");
    std::fflush(stdout);
  };
  auto gbs = [](double bytes, double s) { return bytes / s * 1e-9; };

  std::vector<float> X = filled(T * C, 1), Y(T * C), dY = filled(T * C, 2), dX(T * C);
  std::vector<float> gamma = filled(C, 3), beta = filled(C, 4), dgamma(C), dbeta(C), mean(T), rstd(T);
  {
    const double f = best_seconds(
        [&] { layernorm_forward(ctx, X.data(), gamma.data(), beta.data(), Y.data(), mean.data(), rstd.data(), T, C); },
        reps);
    report("layernorm", "forward", f, "GB/s", gbs(2.0 * T * C * 4, f), -1);
    const double b = best_seconds([&] {
      layernorm_backward(ctx, dY.data(), X.data(), gamma.data(), mean.data(), rstd.data(), dX.data(), dgamma.data(),
                         dbeta.data(), T, C);
    }, reps);
    report("layernorm", "backward", b, "GB/s", gbs(5.0 * T * C * 4, b), -1);
  }
  {
    std::vector<float> W = filled(H * C, 5, 0.05f), bias = filled(H, 6), Hout(T * H), dH = filled(T * H, 7);
    std::vector<float> dW(H * C), db(H);
    const double flops = 2.0 * T * C * H;
    const double f = best_seconds(
        [&] { linear_forward(ctx, X.data(), W.data(), bias.data(), Hout.data(), T, C, H); }, reps);
    report("linear", "forward", f, "GFLOP/s", flops / f * 1e-9, flops / f * 1e-9 / peak);
    const double b = best_seconds([&] {
      linear_backward(ctx, dH.data(), X.data(), W.data(), dX.data(), dW.data(), db.data(), T, C, H);
    }, reps);
    report("linear", "backward", b, "GFLOP/s", 2 * flops / b * 1e-9, 2 * flops / b * 1e-9 / peak);
    const int64_t n = T * H;
    const double gf = best_seconds([&] { gelu_forward(ctx, dH.data(), Hout.data(), n); }, reps);
    report("gelu", "forward", gf, "GB/s", gbs(2.0 * n * 4, gf), -1);
    const double gb = best_seconds([&] { gelu_backward(ctx, dH.data(), Hout.data(), Hout.data(), n); }, reps);
    report("gelu", "backward", gb, "GB/s", gbs(3.0 * n * 4, gb), -1);
    const double r = best_seconds([&] { residual_add(ctx, Hout.data(), dH.data(), Hout.data(), n); }, reps);
    report("residual_add", "forward", r, "GB/s", gbs(3.0 * n * 4, r), -1);
  }
  {
    std::vector<int32_t> ids(T);
    KeyedRandom rng(99, 0, 0);
    for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>(rng.draw(static_cast<uint64_t>(t)).v[0] % V);
    std::vector<float> table = filled(V * C, 8), dtable(V * C);
    const double f = best_seconds([&] { embedding_forward(ctx, ids.data(), table.data(), Y.data(), T, V, C); }, reps);
    report("embedding", "forward", f, "GB/s", gbs(2.0 * T * C * 4, f), -1);
    const double b = best_seconds([&] { embedding_backward(ctx, ids.data(), dY.data(), dtable.data(), T, V, C); }, reps);
    report("embedding", "backward", b, "GB/s", gbs(1.0 * T * C * 4, b), -1);

    std::vector<float> logits = filled(T * V, 9, 8.f), dlogits(T * V), losses(T);
    for (int64_t t = 0; t < T; t += 7) ids[t] = -1;
    const double cf = best_seconds(
        [&] { cross_entropy_forward(ctx, logits.data(), ids.data(), losses.data(), T, V); }, reps);
    report("cross_entropy", "forward", cf, "GB/s", gbs(1.0 * T * V * 4, cf), -1);
    const double cb = best_seconds(
        [&] { cross_entropy_backward(ctx, logits.data(), ids.data(), dlogits.data(), T, V, 1.f / T); }, reps);
    report("cross_entropy", "backward", cb, "GB/s", gbs(2.0 * T * V * 4, cb), -1);
  }
  {
    // One layer's worth of parameters (~12 C^2) through the optimizer step.
    const int64_t n = 12 * C * C;
    std::vector<float> p = filled(n, 10), g = filled(n, 11), m(n, 0.f), v(n, 0.f);
    AdamWConfig cfg;
    cfg.weight_decay = 0.1f;
    const double s = best_seconds([&] { sum_of_squares(ctx, g.data(), n); }, reps);
    report("sum_of_squares", "forward", s, "GB/s", gbs(1.0 * n * 4, s), -1);
    int64_t step = 0;
    const double a = best_seconds(
        [&] { adamw_update(ctx, p.data(), g.data(), m.data(), v.data(), n, ++step, cfg, 0.5f); }, reps);
    report("adamw", "update", a, "GB/s", gbs(7.0 * n * 4, a), -1);
  }
  return 0;
}

}  // namespace pf::bench
