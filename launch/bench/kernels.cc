// performer-bench kernels: forward + backward time, tokens/s and GFLOP/s of the
// FAVOR+ attention composite (favor_attention_forward/backward: features of q
// and k, linear attention, feature backward) and of exact softmax attention
// (softmax_attention_forward/backward_cpu), causal and bidirectional, over
// sequence lengths n at B=1, H=8, d=64, m=256 (the defaults), on the CPU or,
// with --device cuda, on the first GPU (inputs in device memory, each timed
// call ends with a synchronisation of the stream). On a GPU the fused FAVOR+
// kernels run in fp32 (favor) and on tensor cores (favor_tf32, favor_bf16;
// favor_tf32_slices64 with the features in slices of 64, a block each;
// favor_tf32_tiles with the running state in shared or global memory
// instead of registers; favor_bf16_global_w reading the projection from
// global memory at every tile instead of keeping it in shared memory), and
// the composition in slabs (favor_windowed) beside them.
// Exact softmax is skipped above --softmax-max (16384) unless --all; the
// local window of --window keys (256) runs at every n. --only NAME... and
// --modes causal|bidirectional restrict the rows (a profiler's run).
//
// FLOP counts per head (GEMM-shaped work only; exps not counted). FAVOR+, per
// position, chunk C, D1 = d+1:
//   forward   features 2 * 2 m d  +  linear attention 4 m D1 + 2 C (m + D1) (causal)
//                                                    or 4 m D1 (bidirectional)
//   backward  features recomputed 2 * 2 m d + linear attention backward
//             8 m D1 + 2 m d + 2 C (3 m + D1 + d) (causal) or 8 m D1 (bidirectional)
//             + feature backward 2 * 2 m d
// (the causal C x C intra-chunk products are counted in full, as computed).
// Softmax: forward 4 d, backward 10 d per visible (query, key) pair: n^2 per
// head, causal about half, a window w about n w (causal) or 2 n w.
// The sgemm peak is measured before each length on the same device (the CPU
// backend's sgemm at 2048^3, or cuBLAS sgemm at 8192^3 on the GPU), and every
// figure is given as a fraction of it.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cast/cast.h"
#include "kernels/favor_attention/favor_attention.h"
#include "kernels/gemm/gemm.h"
#include "kernels/random_features/random_features.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/device_buffers.h"
#include "launch/bench/flops.h"
#include "launch/bench/timing.h"
#include "launch/core/tool_cli.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "runtime/random.h"
#include "runtime/tensor.h"

namespace pf::bench {
namespace {

std::vector<float> gaussian(int64_t size, uint64_t stream) { return keyed_normals<float>(size, 99, stream, 0); }

// The FAVOR+ implementations timed: the fused kernels (favor); on a GPU also
// on tensor cores with TF32 and bf16 operands (favor_tf32, favor_bf16) and
// the composition in slabs over the cuBLAS-based feature-map and
// linear-attention kernels (its CSV name stays favor_windowed, which earlier
// results use).
struct FavorVariant {
  const char* name;
  int64_t slab_rows;  // FavorShape::slab_rows
  TileMath math;
  int64_t feature_slice = 0;  // FavorShape::feature_slice
  bool state_in_registers = true;  // FavorShape::state_in_registers
  bool projection_in_shared = true;  // FavorShape::projection_in_shared
};
std::vector<FavorVariant> favor_variants(bool gpu) {
  if (!gpu) return {{"favor", 0, TileMath::Fp32}};
  return {{"favor", 0, TileMath::Fp32},
          {"favor_tf32", 0, TileMath::Tf32},
          {"favor_tf32_slices64", 0, TileMath::Tf32, 64},
          {"favor_tf32_tiles", 0, TileMath::Tf32, 0, false},
          {"favor_bf16", 0, TileMath::Bf16},
          {"favor_bf16_global_w", 0, TileMath::Bf16, 0, true, false},
          {"favor_windowed", kFavorDefaultSlabRows, TileMath::Fp32}};
}

// Exact softmax attention timed: the whole sequence (softmax; on a GPU also
// on tensor cores, softmax_tf32 and softmax_bf16) and a local window of
// `window` keys (window<w>; on a GPU window<w>_bf16 too). The bf16 rows
// store q, k, v, o and their gradients in bf16, as a bf16 model (and
// SDPA's flash backend in bf16) does; the others in fp32.
struct SoftmaxVariant {
  std::string name;
  int64_t window;
  TileMath math;
  DType storage = DType::f32;
};
std::vector<SoftmaxVariant> softmax_variants(bool gpu, int64_t window) {
  const std::string w = "window" + std::to_string(window);
  if (!gpu) return {{"softmax", 0, TileMath::Fp32}, {w, window, TileMath::Fp32}};
  return {{"softmax", 0, TileMath::Fp32},
          {"softmax_tf32", 0, TileMath::Tf32},
          {"softmax_bf16", 0, TileMath::Bf16, DType::bf16},
          {w, window, TileMath::Fp32},
          {w + "_bf16", window, TileMath::Bf16, DType::bf16}};
}

// The (query, key) pairs of a head that the mask lets through.
double visible_pairs(int64_t n, const SoftmaxMask& mask) {
  double pairs = 0;
  for (int64_t i = 0; i < n; ++i) pairs += static_cast<double>(mask.end_key(i, n) - mask.first_key(i));
  return pairs;
}

}  // namespace

int run_kernels(int argc, char** argv) {
  CLI::App app{"FAVOR+ attention vs exact softmax attention (CPU or GPU), forward + backward"};
  std::string device_name = "cpu";
  std::vector<int64_t> sizes{1024, 2048, 4096, 8192, 16384, 32768, 65536};
  int64_t batch = 1, heads = 8, d = 64, m = 256, chunk = 64, softmax_max = 16384, window = 256;
  int reps = 2;
  bool all = false;
  std::string csv;
  app.add_option("--sizes", sizes, "sequence lengths n");
  app.add_option("--batch", batch, "B")->capture_default_str();
  app.add_option("--heads", heads, "H")->capture_default_str();
  app.add_option("-d", d, "head dim")->capture_default_str();
  app.add_option("-m", m, "random features")->capture_default_str();
  app.add_option("--chunk", chunk, "causal chunk")->capture_default_str();
  app.add_option("--softmax-max", softmax_max, "longest n timed for exact softmax")->capture_default_str();
  app.add_flag("--all", all, "time exact softmax at every n");
  app.add_option("--window", window, "the local window's keys (its rows run at every n)")
      ->check(pf::positive_number())
      ->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions after one warm-up (best is kept)")->capture_default_str();
  std::vector<std::string> only, modes{"causal", "bidirectional"};
  app.add_option("--only", only, "time only these rows (kernel names of the CSV; default: all of the device's)");
  app.add_option("--modes", modes, "causal and/or bidirectional")
      ->check(CLI::IsMember({"causal", "bidirectional"}))
      ->capture_default_str();
  app.add_option("--csv", csv, "write the CSV here instead of stdout");
  app.add_option("--device", device_name, "cpu or cuda (the first GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  const bool gpu = device_name == "cuda";
  std::vector<std::string> known;
  for (const FavorVariant& f : favor_variants(gpu)) known.emplace_back(f.name);
  for (const SoftmaxVariant& f : softmax_variants(gpu, window)) known.push_back(f.name);
  for (const std::string& name : only) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += " " + k;
    std::fprintf(stderr, "kernels: --only %s: no such row on %s; the rows are:%s\n", name.c_str(), device_name.c_str(),
                 list.c_str());
    return 2;
  }
  auto timed_row = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  std::vector<bool> directions;
  for (bool causal : {true, false})
    if (std::find(modes.begin(), modes.end(), causal ? "causal" : "bidirectional") != modes.end())
      directions.push_back(causal);
  if (gpu && cuda_device_count() == 0) {
    std::fprintf(stderr, "kernels: --device cuda, but %s\n", cuda_unavailable_reason().c_str());
    return 2;
  }
  const Device device = gpu ? Device::cuda(0) : Device::cpu();
  MemoryTracker tracker(device);
  // On the CPU a synchronous stream: each kernel runs inside the timed call.
  ExecResources resources(device, tracker, HostStreamConfig{});
  const ExecContext& ctx = resources.ctx();
  auto timed = [&](auto&& fn, int r) {
    return best_seconds(
        [&] {
          fn();
          synchronize(ctx.stream);
        },
        r);
  };

  CsvOutput csv_out(csv,
                    "kernel,device,mode,n,batch,heads,d,m,threads,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,gflop,gflops,"
                    "peak_sgemm_gflops,fraction_of_peak,peak_bytes\n");
  FILE* out = csv_out.file();
  const int64_t bh = batch * heads;
  Buffers constant(tracker);
  const float* W =
      constant.make(random_projection_f32({m, d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {1, 0, 0}));
  for (int64_t n : sizes) {
    const double peak = device_sgemm_gflops(ctx, gpu ? 8192 : 2048);
    std::fprintf(stderr, "kernels: n=%ld, sgemm peak %.1f GFLOP/s on %s (%d CPU threads)\n", static_cast<long>(n), peak,
                 device.str().c_str(), omp_get_max_threads());
    const int64_t size = bh * n * d;
    Buffers b(tracker);
    const float *q = b.make(gaussian(size, 1)), *k = b.make(gaussian(size, 2)), *v = b.make(gaussian(size, 3)),
                *g = b.make(gaussian(size, 4));
    float *o = b.make(size), *dq = b.make(size), *dk = b.make(size), *dv = b.make(size), *den = b.make(bh * n),
          *rs = b.make(bh * n);
    // peak_bytes: the tracker's high-water mark over the row's calls, inputs,
    // outputs and temporaries included (the peak is reset before each row).
    auto row = [&](const char* kernel, bool causal, double tf, double tb, double gflop) {
      const double t = tf + tb;
      std::fprintf(out, "%s,%s,%s,%ld,%ld,%ld,%ld,%ld,%d,%.4f,%.4f,%.4f,%.0f,%.2f,%.1f,%.1f,%.3f,%lld\n", kernel,
                   device.str().c_str(), causal ? "causal" : "bidirectional", static_cast<long>(n),
                   static_cast<long>(batch), static_cast<long>(heads), static_cast<long>(d), static_cast<long>(m),
                   omp_get_max_threads(), tf, tb, t, static_cast<double>(batch * n) / t, gflop, gflop / t, peak,
                   gflop / t / peak, static_cast<long long>(tracker.stats().peak_bytes));
      std::fflush(out);
    };
    for (const FavorVariant& variant : favor_variants(gpu)) {
      if (!timed_row(variant.name)) continue;
      for (bool causal : directions) {
        FavorAttentionParams p = favor_attention_params(batch, heads, n, d, m, causal, FeatureKernel::Softmax, chunk);
        p.shape.slab_rows = variant.slab_rows;
        p.shape.tile_math = variant.math;
        p.shape.feature_slice = variant.feature_slice;
        p.shape.state_in_registers = variant.state_in_registers;
        p.shape.projection_in_shared = variant.projection_in_shared;
        tracker.reset_peak();
        float* tp = causal ? nullptr : b.make(favor_attention_total_floats(p));
        const double tf = timed([&] { favor_attention_forward(ctx, p, q, k, v, W, o, den, rs, tp); }, reps);
        const double tb =
            timed([&] { favor_attention_backward(ctx, p, q, k, v, W, o, den, rs, tp, g, dq, dk, dv); }, reps);
        row(variant.name, causal, tf, tb, favor_flop(bh, n, d, m, chunk, causal) * 1e-9);
      }
    }
    float* lse = b.make(bh * n);
    for (const SoftmaxVariant& variant : softmax_variants(gpu, window)) {
      if (!timed_row(variant.name) || (variant.window == 0 && n > softmax_max && !all)) continue;
      for (bool causal : directions) {
        tracker.reset_peak();
        SoftmaxAttentionParams p = softmax_attention_params(bh, n, d, causal, variant.window);
        p.tile_math = variant.math;
        const int sreps = variant.window == 0 && n >= 8192 ? 1 : reps;
        // The row's storage: the fp32 buffers, or copies rounded to it.
        Buffers narrow(tracker);
        auto stored = [&](const float* x) -> const void* {
          if (variant.storage == DType::f32) return x;
          void* y = narrow.make(size, variant.storage);
          cast_narrow(ctx, variant.storage, x, y, size);
          return y;
        };
        auto out = [&](float* x) -> void* {
          return variant.storage == DType::f32 ? x : narrow.make(size, variant.storage);
        };
        const void *sq = stored(q), *sk = stored(k), *sv = stored(v), *sg = stored(g);
        void *so = out(o), *sdq = out(dq), *sdk = out(dk), *sdv = out(dv);
        const double tf =
            timed([&] { softmax_attention_forward(ctx, p, variant.storage, sq, sk, sv, so, lse); }, sreps);
        const double tb =
            timed([&] { softmax_attention_backward(ctx, p, variant.storage, sq, sk, sv, so, lse, sg, sdq, sdk, sdv); },
                  sreps);
        const double pairs = static_cast<double>(bh) * visible_pairs(n, SoftmaxMask{causal, variant.window});
        row(variant.name.c_str(), causal, tf, tb, 14.0 * pairs * d * 1e-9);
      }
    }
  }
  csv_out.commit();
  return 0;
}

}  // namespace pf::bench
