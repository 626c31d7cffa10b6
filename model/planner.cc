#include "model/planner.h"

#include <omp.h>

#include <algorithm>
#include <sstream>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/reduce/column_sums.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention_comm.h"
#include "model/packed_layout.h"
#include "model/params.h"
#include "runtime/memory.h"

namespace pf {

namespace {

// A bf16/f16 layer's working bytes beyond its kept activations, stage by
// stage of model/layer.cc, at its largest: in the forward before the
// attention (`forward_early`) and after it (`forward_late`); in the backward, above
// d_mid [T, C], the FFN part (`ffn_backward`, while g, h1 and ln2 are still
// kept) and the attention part (`attention_backward`, before g, h1 and ln2
// are taken off). The CPU linear layer widens both 16-bit operands and the
// rounded dY into fp32 scratch (kernels/linear/linear_lowp_cpu.cc); a GEMM
// of X [T, in] and W [out, in] adds (in + out) T + in out floats, and out T
// in 16 bits for dY while it is widened.
// CUDA runs the 16-bit GEMMs without widening; its bound stays the one the
// CPU had before these stages were counted (the FFN's [T, F] operands at
// their largest), which one GPU step measured at 0.954 of the plan.
struct LowpLayerBytes {
  int64_t forward_early = 0, forward_late = 0, ffn_backward = 0, attention_backward = 0;
};

LowpLayerBytes lowp_layer_bytes(int64_t T, int64_t C, int64_t F, int64_t h, Device device) {
  const int64_t f = 4;
  if (!device.is_cpu()) {
    const int64_t ffn = f * T * F + f * T * C + f * (2 * T * F + C * F + T * C) + h * T * C;
    return {0, f * (3 * T * F + C * F), ffn, 0};
  }
  LowpLayerBytes b;
  // Forward: qkv [T, 3C] beside the widened ln1 and W_qkv; then the widened
  // merged and W_o; h1 [T, F] beside the widened ln2 and W_1; h1, its
  // widened kept copy and g [T, F]; the widened g and W_2 (the output [T, C]
  // is the layer's own).
  b.forward_early = f * (4 * T * C + 3 * C * C);
  b.forward_late = f * std::max({T * C + C * C, T * F + T * C + C * F, 3 * T * F, T * F + C * F});
  // FFN backward: d_g [T, F] beside the second GEMM's widened dY [T, C], g
  // and W_2, or beside its dY in 16 bits; then (g and h1 released) d_g,
  // d_ln2 [T, C] and the first GEMM's widened dY [T, F], ln2 and W_1, or its
  // dY in 16 bits.
  b.ffn_backward = std::max({f * (2 * T * F + T * C + C * F), f * (T * F + T * C) + h * T * C,
                             f * (2 * T * F + 2 * T * C + C * F) - 2 * h * T * F, f * (2 * T * F + T * C) - h * T * F});
  // Attention backward: d_qkv_heads [T, 3C] and d_merged [T, C] beside the
  // output projection's widened dY, merged and W_o (or its 16-bit dY); d_qkv
  // [T, 3C] and d_ln1 [T, C] beside the qkv GEMM's widened dY [T, 3C], ln1
  // and W_qkv (or its 16-bit dY).
  b.attention_backward = std::max(
      {f * (6 * T * C + C * C), f * 5 * T * C + h * T * C, f * (8 * T * C + 3 * C * C), f * 7 * T * C + 3 * h * T * C});
  return b;
}

// The head of a bf16/f16 model: the final LayerNorm's output kept in 16
// bits beside its statistics. Forward: the fp32 output beside its 16-bit
// copy; the logits [T, V] beside the head GEMM's widened operands (the
// LayerNorm output and the tied embedding [V, C]), then beside the token
// losses. Backward: the logits' gradient (in place) and d_h [T, C] beside
// the GEMM's widened dY [T, V] and its 16-bit dY, or the widened LayerNorm
// output and embedding; then d_h and d_x [T, C]. CUDA: the bound of before
// (every part at once), as for the layers.
int64_t lowp_head_bytes(int64_t T, int64_t C, int64_t V, int64_t h, Device device) {
  const int64_t f = 4;
  if (!device.is_cpu())
    return f * std::max(T * V + 2 * T * C + 3 * T, 3 * T * C + 2 * T) + h * T * C + f * (T * C + V * C) +
           (f + h) * T * V;
  const int64_t kept = h * T * C + f * 2 * T;
  return kept + std::max({f * T * C, f * (T * V + T * C + V * C), f * (T * V + T),
                          f * (2 * T * V + T * C) + std::max(h * T * V, f * (T * C + V * C)), f * 2 * T * C});
}

}  // namespace

MemoryPlan plan_memory(const ModelConfig& cfg, int64_t B, int64_t n, bool training, Device device, bool packed,
                       int64_t sp) {
  const int64_t T = B * n, C = cfg.width, F = cfg.ffn, H = cfg.heads, D = cfg.head_dim(), V = cfg.vocab, L = cfg.layers,
                m = cfg.features, BH = B * H;
  const bool linear = cfg.attention != AttentionKind::Softmax;
  const int64_t ss = 1 + m * (D + 1);
  const int64_t f = 4;  // bytes per float

  // Mixed precision: a 16-bit weight copy, and ln1, merged, ln2 and the two
  // FFN hidden tensors kept in 16 bits (model/layer.cc).
  const bool lowp = cfg.dtype != DType::f32;
  const int64_t h = dtype_size(cfg.dtype);
  const int64_t kept16 = 3 * T * C + 2 * T * F;
  const LowpLayerBytes lowp_bytes = lowp ? lowp_layer_bytes(T, C, F, h, device) : LowpLayerBytes{};

  MemoryPlan plan;
  const int64_t P = ParamLayout(cfg).total();
  // The random projections [m, D] per layer (exp's trained ones are in P).
  const bool exp = cfg.attention == AttentionKind::Exp;
  // (The model holds its gradients' buffer whether or not it trains.)
  plan.persistent = f * P * (training ? 4 : 2) + (linear && !exp ? f * L * m * D : 0) + (lowp ? h * P : 0);

  // Kept per layer for its backward: ln1, the q/k/v heads (3), the merged
  // heads, mid and ln2 [T, C] each, the FFN's two [T, F], the LayerNorms'
  // statistics (4 [T]) and the attention's own tensors.
  // (Packed, bidirectional: the totals of the two pieces of each sample that
  // continue across ranks.)
  // Hybrid (model.window with a linear kind): the linear kind's tensors, the
  // window's softmax output and lse, and their gated mix.
  const bool hybrid = cfg.hybrid();
  const int64_t softmax_saved = T * C + T * H;
  const int64_t att_saved =
      linear ? (T * C + 2 * T * H + BH * ss * (packed && !cfg.causal() ? 2 : 1)) + (hybrid ? softmax_saved + T * C : 0)
             : softmax_saved;
  const int64_t layer_acts = f * (7 * T * C + 2 * T * F + 4 * T + att_saved) - (f - h) * kept16;
  // Inside the attention forward: the unnormalised outputs y [BH, n, D+1],
  // the block totals, the early block totals, the scan's workspace, and the
  // fused op's workspace on `device` (CPU: per-thread tiles; CUDA: window
  // buffers). No buffer is m wide per position.
  // Packed (model/attention_packed.cc): calls over up to kPackedPiecesPerCall
  // pieces, G = that many pieces' heads, in place; the fused op's workspace
  // of the larger of the two calls.
  const int64_t G = kPackedPiecesPerCall * H;
  const int threads = omp_get_max_threads();
  const int64_t favor_ws =
      !linear ? 0
              : std::max(favor_workspace_bytes(attention_favor_shape(cfg, BH, n), device, threads),
                         packed ? favor_workspace_bytes(attention_favor_shape(cfg, G, n), device, threads) : 0);
  // Packed: the scans' flagged buffers, the per-sample states (last, first,
  // prefix, suffix) and the states of the pieces of one call.
  const int64_t packed_fwd = packed ? f * (2 * BH * (ss + 1) + BH + 4 * BH * ss + G * ss) : 0;
  // Softmax (or a hybrid's window) runs over all pieces in place. A window
  // across ranks (model/attention_window.cc): halo buffers (counts and rows
  // of k and v; one per neighbour a rank exchanges with: the previous one,
  // and bidirectional the next one too, `nb`) and the copies of one
  // sample's piece with its halo rows (on `sides` sides: causal one; a rank
  // between two others, sp >= 3, two).
  const int64_t hw = cfg.window > 0 ? cfg.window - 1 : 0, halo = B + 2 * BH * hw * D;
  const bool across = cfg.window > 0 && sp > 1;
  const int64_t nb = cfg.causal() ? 1 : 2, sides = cfg.causal() ? 1 : std::min<int64_t>(2, sp - 1);
  const int64_t L_ext = (n + sides * hw) * H;
  // The table of the pieces that run in place (three int64 per head of a
  // piece without halo rows; packed, at most n pieces a sample).
  const int64_t spans_table = 8 * std::max<int64_t>(1, 3 * BH * (packed ? n : 1));
  // The softmax kernels' own scratch (softmax_attention.h), for a call over
  // at most BH heads of n rows and the halo rows: the CPU's tiles per thread
  // (and a row statistic per thread backward), CUDA's D per row backward.
  const SoftmaxAttentionParams sm = attention_softmax_params(cfg, BH, n + (across ? sides * hw : 0));
  const int64_t sm_fwd_ws = softmax_attention_forward_workspace_bytes(sm, device, threads);
  const int64_t sm_bwd_ws = softmax_attention_backward_workspace_bytes(sm, device, threads);
  // Forward across ranks: the exchange (a buffer sent and one received per
  // neighbour), then the received ones beside a piece's q, k, v, o and lse.
  const int64_t softmax_fwd =
      across ? std::max(f * 2 * nb * halo, sm_fwd_ws + spans_table + f * (nb * halo + 4 * L_ext * D + L_ext))
             : sm_fwd_ws;
  // (A hybrid runs the linear kind, then the window: one after the other.)
  const int64_t att_fwd =
      linear ? std::max(f * (T * (C + H) + 4 * BH * ss) + favor_ws + packed_fwd, hybrid ? softmax_fwd : int64_t{0})
             : softmax_fwd;
  // Backward: the gradient block total, the suffix, the scan's workspace and
  // the workspace; packed: the scans' buffers, the per-sample states (first,
  // last, prefix, suffix and the two slots of the waiting pieces) and a
  // call's pieces' gradient states and totals (or prefixes).
  const int64_t packed_bwd = packed ? f * (2 * BH * (ss + 1) + BH + 6 * BH * ss + 2 * G * ss) : 0;
  // exp, unpacked: each of the BH heads' dW [m, D] before the sum over the batch.
  const int64_t exp_dw = exp && !packed ? f * BH * m * D : 0;
  // Backward across ranks: the exchange again; the received buffers and the
  // halo gradients going back beside a piece's q, k, v, o, lse, d_o and its
  // dq, dk, dv; then the gradients received too, and the rows they add to.
  const int64_t softmax_bwd =
      across ? std::max({f * 2 * nb * halo, sm_bwd_ws + spans_table + f * (2 * nb * halo + 8 * L_ext * D + L_ext),
                         spans_table + f * (3 * nb * halo + BH * hw * D)})
             : sm_bwd_ws;
  const int64_t linear_bwd = f * 3 * BH * ss + favor_ws + packed_bwd + exp_dw;
  // Hybrid: the output gradient's two parts [T, C] each during the linear
  // backward; then the window's part and its q, k, v gradients (4 [T, C]).
  const int64_t att_bwd = !linear  ? softmax_bwd
                          : hybrid ? std::max(f * 2 * T * C + linear_bwd, f * 4 * T * C + softmax_bwd)
                                   : linear_bwd;
  // The forward's working set: qkv [T, 3C] beside the heads, the attention,
  // and under bf16/f16 the widened operands. Before the attention the layer
  // holds only ln1, its statistics, the heads and the attention's own
  // tensors of its activations (what an evaluation, which keeps no earlier
  // layer, sees).
  const int64_t fwd_early = std::max({f * 3 * T * C, att_fwd, lowp_bytes.forward_early});
  const int64_t layer_fwd = std::max(fwd_early, lowp_bytes.forward_late);
  const int64_t acts_after_attention = (lowp ? h : f) * (2 * T * C + 2 * T * F) + f * (T * C + 2 * T);
  // Backward of one layer, above its activations: the FFN part with every
  // activation live; after it the layer has released g, h1 and ln2 (kept in
  // the model dtype), so the attention and projection parts run without them.
  const int64_t ffn_freed = h * (2 * T * F + T * C);
  // On CUDA the bias and LayerNorm parameter gradients take the column sums'
  // partials (a few MiB at most) on top of whichever part is running.
  const int64_t col_sums = device.is_cuda() ? std::max(column_sums_scratch_bytes(T, std::max(F, 3 * C), 1),
                                                       column_sums_scratch_bytes(T, C, 2))
                                            : 0;
  // The FFN part: d_g [T, F]; in fp32 the layer releases g and h1 before
  // d_ln2 [T, C] is made.
  const int64_t ffn_bwd = lowp ? lowp_bytes.ffn_backward : f * T * F + std::max<int64_t>(0, f * (T * C - 2 * T * F));
  // The attention part: d_qkv_heads, d_merged and d_o [T, C] each beside the
  // attention's backward, or d_qkv_heads beside d_qkv (with d_ln1 next).
  const int64_t att_part = std::max({f * (5 * T * C) + att_bwd, f * 6 * T * C, lowp_bytes.attention_backward});
  const int64_t layer_bwd = f * T * C + col_sums + std::max(ffn_bwd, att_part - ffn_freed);
  const int64_t ids = 8 * T;
  // The head (model/model.cc): the final LayerNorm's output and statistics,
  // the logits and the token losses; in its backward the output's gradient
  // d_h, then d_x (the logits released).
  const int64_t head =
      lowp ? lowp_head_bytes(T, C, V, h, device) : f * std::max(T * V + 2 * T * C + 3 * T, 3 * T * C + 2 * T);
  // In the layers' backward: the final LayerNorm's statistics, and d_x [T, C]
  // in place of the top layer's output (released when the backward starts).
  const int64_t head_kept = f * 2 * T;

  if (!training) {
    plan.activations = f * 2 * T * C + ids;
    plan.transient =
        std::max({layer_acts - acts_after_attention + fwd_early, layer_acts + lowp_bytes.forward_late, head});
  } else if (!cfg.checkpoint_activations) {
    plan.activations = ids + f * (L + 1) * T * C + L * layer_acts;
    plan.transient = std::max({layer_fwd, head, head_kept + layer_bwd});
  } else {
    // The layer inputs; in the backward of layer l the inputs above l are
    // released, which leaves room for the gradient d_x [T, C]. The rebuild of
    // a layer's activations also holds its output [T, C] (dropped before that
    // layer's backward).
    plan.activations = ids + f * (L + 1) * T * C;
    plan.transient =
        std::max({head, head_kept + f * T * C + layer_acts + layer_fwd, head_kept + layer_acts + layer_bwd});
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

int64_t longest_local_length(const ModelConfig& cfg, int64_t batch, int64_t cap_bytes, int64_t multiple, Device device,
                             bool packed, int64_t sp) {
  // 3% headroom for what the plan does not see (allocator rounding, library buffers).
  const double budget = 0.97 * static_cast<double>(cap_bytes);
  auto fits = [&](int64_t k) {
    return static_cast<double>(plan_memory(cfg, batch, k * multiple, true, device, packed, sp).peak) <= budget;
  };
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
