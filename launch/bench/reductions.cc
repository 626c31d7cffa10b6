// performer-bench reductions: the backward's column sums at a training shape,
// on the CPU or the first GPU, each as GB/s of the bytes it moves and as a
// fraction of a device-to-device copy of T x C floats timed in the same run:
//   linear_1col   linear_backward with one input column (its GEMMs are
//                 trivial, so the bias gradient db = sum_t dY is the work);
//                 bytes: dY read twice (the dW GEMM and the bias sum)
//   layernorm     layernorm_backward: dX, then dgamma and dbeta; bytes as
//                 performer-bench posops counts them (5 T C floats)
//   embedding     embedding_backward of T ids over a vocabulary V (sort and
//                 scatter); bytes: dY read once
//   performer-bench reductions [--device cpu|cuda] [--tokens T] [--widths C ...] [--vocab V] [--reps R] [--csv FILE]
// Defaults: the paper preset's longest local length under 16 GiB with
// checkpointing (284,672 tokens), widths 512 and 2,048 (the FFN's bias).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/embedding/embedding.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/device_buffers.h"
#include "launch/bench/timing.h"
#include "runtime/check.h"
#include "runtime/exec.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<float> reduction_input(int64_t n, uint64_t stream, float scale = 1.f) {
  return keyed_uniform(n, 4321, stream, scale);
}

}  // namespace

int run_reductions(int argc, char** argv) {
  CLI::App app{"the backward's column sums (bias, LayerNorm, embedding): GB/s and fraction of a device copy"};
  std::string device_name = "cpu", csv;
  int64_t T = 284672, V = 25;
  std::vector<int64_t> widths{512, 2048};
  int reps = 5;
  app.add_option("--device", device_name, "cpu or cuda (the first GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--tokens", T, "rows T")->capture_default_str();
  app.add_option("--widths", widths, "columns C (one row of results each)");
  app.add_option("--vocab", V, "embedding vocabulary V")->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions after one warm-up (best is kept)")->capture_default_str();
  app.add_option("--csv", csv, "write the CSV here instead of stdout");
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  const bool gpu = device_name == "cuda";
  if (gpu && cuda_device_count() == 0) {
    std::fprintf(stderr, "reductions: --device cuda, but %s\n", cuda_unavailable_reason().c_str());
    return 2;
  }
  PF_REQUIRE(ConfigError, T > 0 && V > 0 && reps > 0, "reductions: --tokens, --vocab and --reps must be positive");
  const Device device = gpu ? Device::cuda(0) : Device::cpu();
  MemoryTracker tracker(device);
  ExecResources resources(device, tracker, HostStreamConfig{});
  const ExecContext& ctx = resources.ctx();
  auto timed = [&](auto&& fn) {
    return best_seconds(
        [&] {
          fn();
          synchronize(ctx.stream);
        },
        reps + 1);
  };
  CsvOutput csv_out(csv, "op,device,T,C,V,seconds,bytes,gb_per_s,copy_gb_per_s,fraction_of_copy\n");
  std::FILE* out = csv_out.file();
  for (int64_t C : widths) {
    PF_REQUIRE(ConfigError, C > 0, "reductions: --widths must be positive, got " << C);
    Buffers b(tracker);
    const int64_t n = T * C;
    float *dY = b.make(reduction_input(n, 1)), *X = b.make(reduction_input(n, 2, 4.f)), *dX = b.make(n);
    const double copy_s = timed([&] { copy_bytes(ctx.stream, dX, device, dY, device, 4 * n); });
    const double copy_gbs = 2.0 * 4 * n / copy_s * 1e-9;
    auto report = [&](const char* op, double s, double bytes) {
      const double gbs = bytes / s * 1e-9;
      std::fprintf(out, "%s,%s,%lld,%lld,%lld,%.6f,%.0f,%.1f,%.1f,%.3f\n", op, device.str().c_str(),
                   static_cast<long long>(T), static_cast<long long>(C), static_cast<long long>(V), s, bytes, gbs,
                   copy_gbs, gbs / copy_gbs);
      std::fflush(out);
    };
    {
      float *ones = b.make(std::vector<float>(T, 1.f)), *W = b.make(reduction_input(C, 3)), *dW = b.make(C),
            *db = b.make(C);
      report("linear_1col", timed([&] { linear_backward(ctx, dY, ones, W, nullptr, dW, db, T, 1, C); }), 2.0 * 4 * n);
    }
    {
      float *g = b.make(reduction_input(C, 4)), *beta = b.make(reduction_input(C, 5)), *Y = b.make(n),
            *mean = b.make(T), *rstd = b.make(T), *dg = b.make(C), *dbeta = b.make(C);
      layernorm_forward(ctx, X, g, beta, Y, mean, rstd, T, C);
      report("layernorm", timed([&] { layernorm_backward(ctx, dY, X, g, mean, rstd, dX, dg, dbeta, T, C); }),
             5.0 * 4 * n);
    }
    {
      std::vector<int32_t> ids(T);
      KeyedRandom rng(99, 0, 0);
      for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>(rng.draw(static_cast<uint64_t>(t)).v[0] % V);
      auto* ids_dev = reinterpret_cast<int32_t*>(b.make(T));
      copy_bytes_blocking(ids_dev, device, ids.data(), Device::cpu(), 4 * T);
      float* dtable = b.make(V * C);
      report("embedding", timed([&] { embedding_backward(ctx, ids_dev, dY, dtable, T, V, C); }), 1.0 * 4 * n);
    }
  }
  csv_out.commit();
  return 0;
}

}  // namespace pf::bench
