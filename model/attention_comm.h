// Pieces of the attention layer's communication shared by its unpacked
// (attention.cc) and packed (attention_packed.cc) forms: a communication
// phase on the sequence group's stream (the scan operators are in
// kernels/linear_attention/state_scan_combine.h). Internal to model/.
#pragma once

#include <cstdint>

#include "kernels/linear_attention/state_scan_combine.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention.h"
#include "runtime/clock.h"
#include "runtime/comm.h"
#include "runtime/exec.h"
#include "runtime/scan.h"

namespace pf {

// Communication of one attention layer on the sequence group's stream, ordered
// after the work already queued on the compute stream (which wrote its
// inputs); join() makes later compute work wait for it. Times come from
// events, so they mean the same on the host, on CPU streams and on CUDA.
class CommPhase {
 public:
  CommPhase(const ExecContext& ctx, const Communicator& comm)
      : ctx_(ctx), comm_stream_(comm.stream()), holds_caller_(comm.holds_caller()) {
    stream_wait_stream(comm_stream_, ctx.stream);
    start_ = record_event(comm_stream_);
  }
  const Stream& stream() const { return comm_stream_; }
  // Everything of the phase is issued.
  void issued() { end_ = record_event(comm_stream_); }
  void join(bool omit_wait = false) {
    wait_from_ = record_event(ctx_.stream);
    if (!omit_wait) wait_event(ctx_.stream, end_);
    wait_to_ = record_event(ctx_.stream);
  }
  // After the compute stream has reached the join: the phase's times added
  // to t's (a call of several phases).
  void add_times(AttentionTiming& t) const {
    AttentionTiming own;
    times(own);
    t.comm += own.comm;
    t.comm_wait += own.comm_wait;
  }
  // After the compute stream has reached the join.
  void times(AttentionTiming& t) const {
    t.comm = event_elapsed_seconds(start_, end_);
    // A communicator that holds the caller held the launching thread for all of it.
    t.comm_wait = holds_caller_ ? t.comm : event_elapsed_seconds(wait_from_, wait_to_);
  }

 private:
  const ExecContext& ctx_;
  Stream comm_stream_;
  bool holds_caller_;
  Event start_, end_, wait_from_, wait_to_;
};

// Ends the timing of a call that waits for no communication: compute is the
// wall time since t0 (its work may still be queued).
inline void end_local_attention_timing(double t0, AttentionTiming* timing) {
  AttentionTiming t;
  t.compute = seconds_now() - t0;
  if (timing) *timing = t;
}

// Ends a call's timing once its work is done: compute is the wall time since
// t0 less the communication the compute stream waited for.
inline void end_attention_timing(const ExecContext& ctx, AttentionTiming t, double t0, AttentionTiming* timing) {
  synchronize(ctx.stream);
  t.compute = seconds_now() - t0 - t.comm_wait;
  if (timing) *timing = t;
}

// The options of a call's scans: the configured algorithm, scratch in ctx.tracker.
inline ScanOptions attention_scan_options(const AttentionOptions& opt, const ExecContext& ctx,
                                          ScanDirection direction = ScanDirection::Forward) {
  ScanOptions so;
  so.direction = direction;
  so.algorithm = opt.scan;
  so.tracker = ctx.tracker;
  return so;
}

// The arithmetic of the CUDA attention kernels' tile products
// (model.attention_math). Auto: bf16 models round their GEMM operands to 8
// significant bits, so their attention takes bf16 operands and loses no more;
// f16 (11 bits) and f32 models take TF32 (11 bits), which f32 models can
// turn off with model.attention_math = "fp32".
inline TileMath attention_tile_math(const ModelConfig& cfg) {
  switch (cfg.attention_math) {
    case AttentionMath::Fp32: return TileMath::Fp32;
    case AttentionMath::Tf32: return TileMath::Tf32;
    case AttentionMath::Bf16: return TileMath::Bf16;
    case AttentionMath::Auto: break;
  }
  return cfg.dtype == DType::bf16 ? TileMath::Bf16 : TileMath::Tf32;
}

inline SoftmaxAttentionParams attention_softmax_params(const ModelConfig& cfg, int64_t heads, int64_t n) {
  SoftmaxAttentionParams p = softmax_attention_params(heads, n, cfg.head_dim(), cfg.causal(), cfg.window);
  p.tile_math = attention_tile_math(cfg);
  return p;
}

// The packed forms of SequenceAttention::forward / backward (attention_packed.cc).
void packed_attention_forward(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt,
                              const ExecContext& ctx, int64_t heads, int64_t n, const PackedLayout& layout,
                              const float* W, const float* q, const float* k, const float* v, AttentionSaved& saved,
                              AttentionTiming* timing);
void packed_attention_backward(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt,
                               const ExecContext& ctx, int64_t heads, int64_t n, const PackedLayout& layout,
                               const float* W, const float* q, const float* k, const float* v,
                               const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                               float* dW, AttentionTiming* timing);

// The local softmax window (cfg.attention = softmax, cfg.window > 0) across a
// sequence group of 2 or more ranks, unpacked (an empty layout) or on the
// state segments of a packed or family slice (attention_window.cc).
void window_attention_forward(const ModelConfig& cfg, Communicator& sp, const ExecContext& ctx, int64_t heads,
                              int64_t n, const PackedLayout& layout, const float* q, const float* k, const float* v,
                              AttentionSaved& saved, AttentionTiming* timing);
void window_attention_backward(const ModelConfig& cfg, Communicator& sp, const ExecContext& ctx, int64_t heads,
                               int64_t n, const PackedLayout& layout, const float* q, const float* k, const float* v,
                               const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                               AttentionTiming* timing);

}  // namespace pf
