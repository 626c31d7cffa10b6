// Sequence-parallel attention core of one layer (after the q/k/v projections,
// before the output projection), for every attention kind of the model:
//   q, k, v, o, dq, dk, dv   [heads = B*H, n, D]   this rank's block of positions
//   W                        [m, D]                the layer's random projection (favor, relu; elu: I)
//                            [H, m, D]             exp: the layer's trained per-head projections
//   dW                       [H, m, D]             exp: their gradient, accumulated (+=)
//
// favor/relu/elu run the fused FAVOR+ protocol of kernels/favor_attention (the
// same op as performer-attn and the benchmarks), whose random features are
// made chunk by chunk and never held whole:
// causal (ARCHITECTURE.md §2): the block total T_r of the key state, an
// exclusive scan of T_r over the sequence group (issued before the local
// chunks are computed, so communication overlaps compute), the local chunked
// attention, then the prefix added and the normalisation. The backward runs
// the local backward with the forward prefix, reverse-scans the gradient block
// totals U_r and adds the suffix.
// favor/relu/elu, bidirectional: the key state summed over the group (allgather of
// the per-rank states, combined in rank order with the log-scale combine, so
// every rank holds bit-identical totals), then the same for the gradient state.
// softmax: exact tiled attention; the whole sequence must be on one rank.
// model.window > 0: softmax sees only the window; with a linear kind
// (cfg.hybrid()) both run, the linear kind as above and the window's softmax
// as softmax does, and the layer's output is their per-head gated mix
// (kernels/gated_mix) with the layer's attn.gate; the backward splits the
// output gradient between them, adds their q, k, v gradients and accumulates
// the gate's.
// Packed batches (model/packed_layout.h): every sequence of a sample attends
// to itself only; model/attention_packed.cc runs each piece of a sequence
// through the same kernels and combines the pieces across ranks with the
// segmented scan (the ranks sharing a protein then hold its bidirectional
// total to rounding, not bit for bit: each associates it from its own side).
//
// Memory: y [heads, n, D+1], the states, and the fused op's per-thread tiles
// (favor_workspace_bytes); nothing per position is m wide.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/favor_attention/favor_attention.h"
#include "model/config.h"
#include "model/packed_layout.h"
#include "runtime/comm.h"
#include "runtime/exec.h"
#include "runtime/scan.h"
#include "runtime/tensor.h"

namespace pf {

// Seconds spent in one call, for the step's timing breakdown.
struct AttentionTiming {
  double compute = 0;    // local kernels (features, chunks, prefix, normalise)
  double comm = 0;       // scan/allgather time on the communicator's stream
  double comm_wait = 0;  // time the compute stream waited for it (exposed)
};

struct AttentionSaved {
  Tensor o;            // [heads, n, D]   the output (also the layer's attention output)
  Tensor den;          // [heads, n]      linear-attention denominators
  Tensor row_scale;    // [heads, n]      linear-attention row log-scales
  Tensor state;        // [heads, state]  causal: the prefix Pre_r; bidirectional: the global total
  Tensor piece_state;  // packed, bidirectional: [2 B, H, state] the sequence totals of the pieces
                       // that continue across ranks (the others are made again in the backward)
  Tensor lse;          // [heads, n]      softmax row log-sum-exp
  // Hybrid (model.window with a linear kind): the window's softmax tensors,
  // and the gated mix of the two outputs, which is the attention's output.
  std::shared_ptr<AttentionSaved> local;
  Tensor mixed;  // [heads, n, D]
  const Tensor& output() const { return mixed.defined() ? mixed : o; }
};

struct AttentionOptions {
  // Issue the forward scan before the local chunks, so that it runs during
  // them on a stream-ordered communicator (NCCL, MPI with async CPU streams).
  bool overlap_comm = true;
  // Test only: leaves out the compute stream's wait for the forward scan, so
  // that a test can prove the asynchronous CPU streams detect a missing wait.
  bool test_omit_scan_wait = false;
  ScanAlgorithm scan = ScanAlgorithm::Auto;
};

// The feature map of a linear attention kind: favor -> Softmax (FAVOR+),
// relu -> Relu, elu -> Elu, exp -> Exp (ValueError for softmax, which has none).
FeatureKernel attention_feature_kernel(AttentionKind kind);
// The fused op's shape for `heads` = B*H heads of n positions of this model.
FavorShape attention_favor_shape(const ModelConfig& cfg, int64_t heads, int64_t n);

class SequenceAttention {
 public:
  // `sp` is the sequence group (size 1 or nullptr: the whole sequence is here).
  SequenceAttention(const ModelConfig& cfg, Communicator* sp, AttentionOptions options = {});

  // `gate` [H]: the layer's attn.gate (hybrid only, else nullptr). The output
  // is saved.output().
  void forward(const ExecContext& ctx, int64_t heads, int64_t n, const float* W, const float* q, const float* k,
               const float* v, AttentionSaved& saved, AttentionTiming* timing, const PackedLayout* packed = nullptr,
               const float* gate = nullptr) const;
  // Writes (overwrites) dq, dk, dv; accumulates dW (exp, else nullptr) and
  // dgate (hybrid, else nullptr). `packed` and `gate` as given to the forward.
  void backward(const ExecContext& ctx, int64_t heads, int64_t n, const float* W, const float* q, const float* k,
                const float* v, const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                float* dW, AttentionTiming* timing, const PackedLayout* packed = nullptr, const float* gate = nullptr,
                float* dgate = nullptr) const;

 private:
  // One kind's attention (cfg_, or a hybrid's linear or window part).
  void forward_kind(const ModelConfig& cfg, const ExecContext& ctx, int64_t heads, int64_t n, const float* W,
                    const float* q, const float* k, const float* v, AttentionSaved& saved, AttentionTiming* timing,
                    const PackedLayout* packed) const;
  void backward_kind(const ModelConfig& cfg, const ExecContext& ctx, int64_t heads, int64_t n, const float* W,
                     const float* q, const float* k, const float* v, const AttentionSaved& saved, const float* d_o,
                     float* dq, float* dk, float* dv, float* dW, AttentionTiming* timing,
                     const PackedLayout* packed) const;
  // The local softmax window of cfg (softmax with window > 0) over 2 or more ranks.
  bool window_across_ranks(const ModelConfig& cfg) const {
    return cfg.attention == AttentionKind::Softmax && cfg.window > 0 && sp_ != nullptr && sp_->size() > 1;
  }
  ModelConfig cfg_;
  Communicator* sp_;
  AttentionOptions opt_;
};

}  // namespace pf
