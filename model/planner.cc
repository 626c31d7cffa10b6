#include "model/planner.h"

#include <omp.h>

#include <algorithm>
#include <sstream>

#include "model/params.h"
#include "runtime/memory.h"

namespace pf {

MemoryPlan plan_memory(const ModelConfig& cfg, int64_t B, int64_t n, const AttentionOptions& options,
                       bool training) {
  const int64_t T = B * n, C = cfg.width, F = cfg.ffn, H = cfg.heads, D = cfg.head_dim(), V = cfg.vocab,
                L = cfg.layers, m = cfg.features, BH = B * H;
  const bool linear = cfg.attention != AttentionKind::Softmax;
  const int64_t G = options.head_group > 0 ? std::min(options.head_group, BH) : BH;
  const int64_t ss = 1 + m * (D + 1);
  const int64_t f = 4;  // bytes per float

  // Mixed precision: a 16-bit weight copy, and ln1, merged, ln2 and the two
  // FFN hidden tensors kept in 16 bits; the CPU widens GEMM operands into
  // fp32 scratch (the largest: the FFN's [T, F] input and [C, F] weight).
  const bool lowp = cfg.dtype != DType::f32;
  const int64_t h = dtype_size(cfg.dtype);
  const int64_t kept16 = 3 * T * C + 2 * T * F;
  const int64_t lowp_fwd = lowp ? f * (3 * T * F + C * F) : 0;
  const int64_t lowp_bwd = lowp ? f * (2 * T * F + C * F + T * C) + h * T * C : 0;

  MemoryPlan plan;
  const int64_t P = ParamLayout(cfg).total();
  plan.persistent = f * P * (training ? 4 : 1) + (linear ? f * L * m * D : 0) + (lowp ? h * P : 0);

  // Kept per layer for its backward.
  const int64_t att_saved = linear ? (T * C + 2 * T * H + BH * ss) : (T * C + T * H);
  const int64_t layer_acts = f * (6 * T * C + 2 * T * F + 4 * T + att_saved) - (f - h) * kept16;
  // Inside the attention forward: features of one head group, unnormalised
  // outputs, block totals, scan workspace.
  // Kernel workspaces: the linear-attention kernels hold per-thread chunk
  // buffers (the backward also one C x C block per chunk of the sequence); the
  // feature-map backward holds one [rows, m] buffer.
  const int64_t threads = omp_get_max_threads();
  const int64_t Ck = std::min(cfg.chunk, std::max<int64_t>(n, 1)), D1 = D + 1;
  const int64_t la_fwd = threads * (m * D1 + Ck * D1 + Ck * Ck + Ck * m);
  const int64_t la_bwd = threads * (m * D1 + 2 * Ck * D1 + Ck * Ck + (n + Ck - 1) / Ck * Ck * Ck + Ck * m);
  const int64_t att_fwd =
      linear ? f * (2 * G * n * m + G * n + T * (C + H) + 3 * BH * ss + G * ss + la_fwd) : 0;
  // Backward of one head group: the recomputed features of q and k, their
  // gradients and one more [G, n, m] buffer that is still live when the
  // feature-map backward takes its own (measured at the paper configuration:
  // without it the plan was one [G, n, m] buffer under the measured peak).
  const int64_t att_bwd =
      linear ? f * (5 * G * n * m + G * n + 2 * BH * ss + G * n * D + std::max(la_bwd, G * n * m + G * n)) : 0;
  const int64_t layer_fwd = std::max({f * 3 * T * C, att_fwd, lowp_fwd});
  const int64_t layer_bwd =
      f * T * C + std::max({f * (T * F + T * C) + lowp_bwd, f * (5 * T * C) + att_bwd, f * 6 * T * C, f * 5 * T * C});
  const int64_t ids = 8 * T;
  const int64_t head = f * (T * V + 2 * T * C + 3 * T) + (lowp ? h * T * C + f * (T * C + V * C) : 0);

  if (!training) {
    plan.activations = f * 2 * T * C + ids;
    plan.transient = std::max(layer_acts + layer_fwd, head);
  } else if (!cfg.checkpoint_activations) {
    plan.activations = ids + f * (L + 1) * T * C + L * layer_acts;
    plan.transient = std::max({layer_fwd, head, f * T * C + layer_bwd});
  } else {
    plan.activations = ids + f * (L + 1) * T * C;
    plan.transient = std::max({layer_acts + layer_fwd, head, f * 2 * T * C + layer_acts + layer_bwd});
  }
  plan.peak = plan.persistent + plan.activations + plan.transient;
  return plan;
}

std::string MemoryPlan::summary() const {
  std::ostringstream os;
  os << "peak " << format_bytes(peak) << " = persistent " << format_bytes(persistent) << " + activations "
     << format_bytes(activations) << " + transient " << format_bytes(transient);
  return os.str();
}

int64_t longest_local_length(const ModelConfig& cfg, int64_t batch, int64_t cap_bytes, int64_t multiple,
                             const AttentionOptions& options) {
  // 3% headroom for what the plan does not see (allocator rounding, library buffers).
  const double budget = 0.97 * static_cast<double>(cap_bytes);
  auto fits = [&](int64_t k) { return static_cast<double>(plan_memory(cfg, batch, k * multiple, options).peak) <= budget; };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (fits(hi) && hi < (int64_t{1} << 40) / multiple) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * multiple;
}

}  // namespace pf
