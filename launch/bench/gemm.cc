// performer-bench gemm: sgemm GFLOP/s of each CPU backend at square sizes.
// Every other CPU figure is reported as a fraction of the best number here,
// measured in the same run. With --linear IN:OUT ... and --rows T it times
// instead the three GEMMs of each linear layer [T, IN] -> [T, OUT] as the CPU
// linear kernel calls them (forward Y = X W^T, dX = dY W, dW += dY^T X) and
// gives each as a fraction of the square 2048 sgemm measured just before.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/timing.h"
#include "runtime/check.h"
#include "runtime/errors.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"

namespace pf::bench {

namespace {

// Parses IN:OUT.
std::pair<int64_t, int64_t> parse_linear(const std::string& text) {
  const size_t colon = text.find(':');
  PF_REQUIRE(ConfigError, colon != std::string::npos, "--linear wants IN:OUT, got '" << text << "'");
  try {
    size_t used_in = 0, used_out = 0;
    const int64_t in = std::stoll(text.substr(0, colon), &used_in), out = std::stoll(text.substr(colon + 1), &used_out);
    if (in > 0 && out > 0 && used_in == colon && used_out == text.size() - colon - 1) return {in, out};
  } catch (const std::exception&) {
  }
  PF_REQUIRE(ConfigError, false, "--linear wants positive IN:OUT, got '" << text << "'");
  return {};
}

// The linear layer's three GEMMs at T rows, against the square sgemm.
void time_linear_gemms(int64_t T, const std::vector<std::string>& layers, int reps) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const std::string& text : layers) shapes.push_back(parse_linear(text));
  const double square = peak_sgemm_gflops(2048);
  std::printf("layer,rows,in,out,gemm,threads,seconds,gflops,square_gflops,fraction_of_square\n");
  for (size_t l = 0; l < shapes.size(); ++l) {
    const std::string& text = layers[l];
    const auto [in, out] = shapes[l];
    std::vector<float> X(T * in, 0.5f), W(out * in, 0.25f), Y(T * out, 0.f), dX(T * in, 0.f), dW(out * in, 0.f);
    const ExecContext host;  // synchronous: the GEMM runs inside the timed call
    struct Gemm {
      const char* name;
      std::function<void()> run;
    };
    const Gemm gemms[] = {
        {"forward X W^T", [&] { gemm_f32(host, false, true, T, out, in, 1.f, X.data(), in, W.data(), in, 0.f, Y.data(), out); }},
        {"dX = dY W", [&] { gemm_f32(host, false, false, T, in, out, 1.f, Y.data(), out, W.data(), in, 0.f, dX.data(), in); }},
        {"dW += dY^T X", [&] { gemm_f32(host, true, false, out, in, T, 1.f, Y.data(), out, X.data(), in, 1.f, dW.data(), in); }},
    };
    for (const Gemm& g : gemms) {
      const double s = best_seconds(g.run, reps), gf = 2.0 * T * in * out / s * 1e-9;
      std::printf("%s,%ld,%ld,%ld,%s,%d,%.6f,%.1f,%.1f,%.3f\n", text.c_str(), static_cast<long>(T),
                  static_cast<long>(in), static_cast<long>(out), g.name, omp_get_max_threads(), s, gf, square,
                  gf / square);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int run_gemm(int argc, char** argv) {
  CLI::App app{"sgemm GFLOP/s per CPU backend"};
  std::vector<int64_t> sizes{512, 1024, 2048, 4096};
  std::vector<std::string> linear;
  int64_t rows = 16384;
  int reps = 3;
  app.add_option("--sizes", sizes, "square sizes M=N=K")->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions (best is kept)")->check(pf::positive_number());
  app.add_option("--linear", linear,
                 "IN:OUT of linear layers whose three GEMMs to time instead (e.g. the paper preset: 512:1536 "
                 "512:512 512:2048 2048:512)");
  app.add_option("--rows", rows, "rows T of the --linear GEMMs (tokens per rank)")->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  if (!linear.empty()) {
    time_linear_gemms(rows, linear, reps);
    return 0;
  }

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
