// performer-bench gemm: sgemm GFLOP/s of each CPU backend at square sizes.
// Every other CPU figure is reported as a fraction of the best number here,
// measured in the same run.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "launch/bench/bench.h"
#include "launch/bench/timing.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"

namespace pf::bench {

int run_gemm(int argc, char** argv) {
  CLI::App app{"sgemm GFLOP/s per CPU backend"};
  std::vector<int64_t> sizes{512, 1024, 2048, 4096};
  int reps = 3;
  app.add_option("--sizes", sizes, "square sizes M=N=K");
  app.add_option("--reps", reps, "timed repetitions (best is kept)");
  CLI11_PARSE(app, argc, argv);

  std::vector<GemmBackend> backends{GemmBackend::OpenBLAS};
  if (cpu_gemm_backend() == GemmBackend::OneDNN) backends.insert(backends.begin(), GemmBackend::OneDNN);
  std::printf("backend,n,threads,seconds,gflops\n");
  for (int64_t n : sizes) {
    std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n, 0.f);
    for (GemmBackend be : backends) {
      auto run = [&] { gemm_f32_cpu_with(be, false, false, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n); };
      const double s = best_seconds(run, reps);
      const double gf = 2.0 * n * n * n / s * 1e-9;
      std::printf("%s,%ld,%d,%.6f,%.1f\n", gemm_backend_name(be), static_cast<long>(n), omp_get_max_threads(), s, gf);
      std::fflush(stdout);
    }
  }
  return 0;
}

double peak_sgemm_gflops(int64_t n) {
  std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n, 0.f);
  const ExecContext host;  // a synchronous CPU stream: the GEMM runs inside the timed call
  const double s =
      best_seconds([&] { gemm_f32(host, false, false, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n); }, 3);
  return 2.0 * n * n * n / s * 1e-9;
}

double device_sgemm_gflops(const ExecContext& ctx, int64_t n) {
  if (ctx.device.is_cpu()) return peak_sgemm_gflops();
  const Tensor A = Tensor::empty({n, n}, DType::f32, *ctx.tracker, "bench.sgemm");
  const Tensor B = Tensor::empty({n, n}, DType::f32, *ctx.tracker, "bench.sgemm");
  const Tensor C = Tensor::empty({n, n}, DType::f32, *ctx.tracker, "bench.sgemm");
  fill_zero(ctx.stream, A.raw(), ctx.device, n * n * 4);
  fill_zero(ctx.stream, B.raw(), ctx.device, n * n * 4);
  const double s = best_seconds(
      [&] {
        gemm_f32(ctx, false, false, n, n, n, 1.f, A.data<float>(), n, B.data<float>(), n, 0.f, C.data<float>(), n);
        synchronize(ctx.stream);
      },
      3);
  return 2.0 * n * n * n / s * 1e-9;
}

}  // namespace pf::bench
