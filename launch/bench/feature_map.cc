// performer-bench feature_map: CPU throughput of the FAVOR+ and ReLU feature
// maps, forward and backward (Phi recomputed, as training does), at n rows of
// head dimension d with m features. GEMM flops: 2 n m d forward, 4 n m d
// backward with recomputation; the figure is also given as a fraction of the
// sgemm peak measured in the same run. Each configuration is first checked
// against the float64 reference on its first rows.
#include "kernels/feature_map/feature_map.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/random_features/random_features.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/timing.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<float> normals(int64_t count, uint64_t seed) { return keyed_normals<float>(count, seed, 0, 0); }

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

int run_feature_map(int argc, char** argv) {
  CLI::App app{"CPU feature-map throughput (forward, backward with recomputation)"};
  int64_t n = 65536;
  std::vector<int64_t> dims{64};
  std::vector<int64_t> features{64, 128, 256};
  int reps = 5;
  app.add_option("--rows", n, "rows n (e.g. B*H*N positions of one layer)")->check(pf::positive_number());
  app.add_option("--dims", dims, "head dimensions d")->check(pf::positive_number());
  app.add_option("--features", features, "feature counts m")->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions (best is kept)")->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  const double peak = peak_sgemm_gflops();
  std::fprintf(stderr, "sgemm peak %.1f GFLOP/s on %d threads\n", peak, omp_get_max_threads());
  const ExecContext ctx;
  std::printf("kernel,n,d,m,threads,pass,seconds,gflops,fraction_of_sgemm_peak,rows_per_second,rel_l2_vs_ref\n");
  for (int64_t d : dims)
    for (int64_t m : features)
      for (FeatureKernel k : {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu}) {
        const FeatureMapParams p = default_feature_params(k, d);
        const std::vector<float> X = normals(n * d, 1), G = normals(n * m, 2);
        const std::vector<float> W =
            random_projection_f32({m, d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {3, 0, 0});
        std::vector<float> Phi(n * m), c(n), dX(n * d);
        // Correctness on the first rows against the float64 reference.
        const int64_t nc = std::min<int64_t>(n, 256);
        const std::vector<double> Xd(X.begin(), X.begin() + nc * d), Wd(W.begin(), W.end()),
            Gd(G.begin(), G.begin() + nc * m);
        std::vector<double> phi_ref(nc * m), dx_ref(nc * d);
        feature_map_forward_ref(p, nc, d, m, Xd.data(), Wd.data(), phi_ref.data(), nullptr);
        feature_map_backward_ref(p, nc, d, m, Xd.data(), Wd.data(), nullptr, Gd.data(), dx_ref.data());
        feature_map_forward(ctx, p, n, d, m, X.data(), W.data(), Phi.data(), c.data());
        feature_map_backward(ctx, p, n, d, m, X.data(), W.data(), nullptr, G.data(), dX.data());
        const double err_f = rel_l2(std::vector<float>(Phi.begin(), Phi.begin() + nc * m), phi_ref);
        const double err_b = rel_l2(std::vector<float>(dX.begin(), dX.begin() + nc * d), dx_ref);

        const double tf =
            best_seconds([&] { feature_map_forward(ctx, p, n, d, m, X.data(), W.data(), Phi.data(), c.data()); }, reps);
        const double tb = best_seconds(
            [&] { feature_map_backward(ctx, p, n, d, m, X.data(), W.data(), nullptr, G.data(), dX.data()); }, reps);
        const double ff = 2.0 * n * m * d / tf * 1e-9, fb = 4.0 * n * m * d / tb * 1e-9;
        for (int pass = 0; pass < 2; ++pass) {
          const double t = pass ? tb : tf, gf = pass ? fb : ff, err = pass ? err_b : err_f;
          std::printf("%s,%ld,%ld,%ld,%d,%s,%.6f,%.1f,%.3f,%.3g,%.2e\n", feature_kernel_name(k), static_cast<long>(n),
                      static_cast<long>(d), static_cast<long>(m), omp_get_max_threads(), pass ? "backward" : "forward",
                      t, gf, gf / peak, n / t, err);
        }
        std::fflush(stdout);
      }
  return 0;
}

}  // namespace pf::bench
