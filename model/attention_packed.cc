// Packed attention (model/packed_layout.h): every piece of a sample's slice,
// the rows [len, D] of each head of one sequence, is a head of its own in
// calls of the FAVOR+ protocol over pieces (favor_attention.h, FavorPieces):
// up to kPackedPiecesPerCall pieces per call, each call one set of kernel launches
// whatever the pieces' lengths, the rows read and written in place. A
// sequence attends to itself only: a piece's arithmetic is that of a block
// of its rows alone.
// Pieces whose sequence continues on a neighbouring rank exchange states by
// segmented exclusive scans over the sequence group (runtime/scan.h, with the
// fused SegmentedStateCombine), the flag of sample b being "a sequence starts
// in b's slice":
//   forward scan: element = the state of b's last piece; the result is the
//     state of the sequence's earlier part, which runs into b's first piece;
//   reverse scan: element = the state of b's first piece when it continues a
//     sequence of an earlier rank, else the identity; the result is the state
//     of the sequence's later part, which continues b's last piece.
// causal: the key-state prefix goes to the first piece (favor_add_prefix);
//   in the backward the prefix to the first piece's dq and the gradient
//   suffix to the last piece's dk, dv.
// bidirectional: a piece's sequence total is [prefix (+)] own [(+) suffix] of
//   key states in the forward and of gradient states in the backward; the
//   pieces that wait for the scans are finished by one call over the slots
//   of saved.piece_state [2 B, H, ss] (a sample's first piece that continues
//   an earlier rank's sequence: slot 2 b; its last piece otherwise: 2 b + 1).
// softmax (one rank only): each piece its own exact attention, all of them in
//   one call over the pieces (SoftmaxAttentionParams::pieces).
// exp: every piece's head h adds its dW to the layer's dW [H, m, D] slot h.
#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention_comm.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {
namespace {

// One piece of the layout.
struct PieceInfo {
  int64_t b = 0, begin = 0, len = 0;
  bool first_continues = false;  // the first piece, continuing a sequence of an earlier rank
  bool last = false;             // the sample's last piece
};

class PackedPass {
 public:
  PackedPass(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt, const ExecContext& ctx,
             int64_t heads, int64_t n, const PackedLayout& layout)
      : cfg_(cfg),
        sp_(sp),
        opt_(opt),
        ctx_(ctx),
        layout_(layout),
        H_(cfg.heads),
        B_(heads / cfg.heads),
        n_(n),
        D_(cfg.head_dim()),
        ss_(1 + cfg.features * (cfg.head_dim() + 1)),
        distributed_(sp != nullptr && sp->size() > 1) {
    PF_REQUIRE(ValueError, heads == B_ * H_,
               "packed attention: " << heads << " heads are not a multiple of " << H_ << " heads per sample");
    layout.check(B_, n);
    // Its pieces and scans take no rank without rows (the inference tools
    // pad a shorter row with a filler; training samples split evenly).
    PF_REQUIRE(ValueError, n > 0,
               "packed attention: this rank holds no row of the packed samples; every rank of the sequence group "
               "needs at least one (pad the sample)");
    for (int64_t b = 0; b < B_; ++b) {
      const std::vector<SequencePiece>& p = layout_.samples[static_cast<size_t>(b)];
      first_.push_back(static_cast<int64_t>(pieces_.size()));
      for (size_t i = 0; i < p.size(); ++i)
        pieces_.push_back(
            PieceInfo{b, p[i].begin, layout_.piece_length(b, i, n_), i == 0 && !p[0].starts(), i + 1 == p.size()});
      last_.push_back(static_cast<int64_t>(pieces_.size()) - 1);
    }
  }
  bool distributed() const { return distributed_; }
  const ExecContext& ctx() const { return ctx_; }
  int64_t H() const { return H_; }
  int64_t D() const { return D_; }
  const std::vector<PieceInfo>& pieces() const { return pieces_; }

  // The rows of every head of every piece: one softmax call over them all.
  std::vector<RowSpan> head_spans() const {
    std::vector<RowSpan> out;
    for (const PieceInfo& x : pieces_)
      for (int64_t h = 0; h < H_; ++h) out.push_back(RowSpan{(x.b * H_ + h) * n_ + x.begin, x.len, 0});
    return out;
  }
  // The calls: f(first piece, end) for runs of at most kPackedPiecesPerCall pieces.
  template <typename F>
  void each_call(F f) const {
    const int64_t count = static_cast<int64_t>(pieces_.size());
    for (int64_t p0 = 0; p0 < count; p0 += kPackedPiecesPerCall) f(p0, std::min(count, p0 + kPackedPiecesPerCall));
  }
  // Whether piece p waits for the scans: for the prefix (its first piece
  // continues a sequence) and/or the suffix (the sample's last piece).
  bool waits(int64_t p, bool prefix, bool suffix) const {
    const PieceInfo& x = pieces_[static_cast<size_t>(p)];
    return distributed_ && ((prefix && x.first_continues) || (suffix && x.last));
  }
  // The slot of saved.piece_state [2 B, H, ss] of a piece that waits for both scans.
  int64_t slot(int64_t p) const {
    const PieceInfo& x = pieces_[static_cast<size_t>(p)];
    return 2 * x.b + (x.first_continues ? 0 : 1);
  }
  int64_t first_piece(int64_t b) const { return first_[static_cast<size_t>(b)]; }
  int64_t last_piece(int64_t b) const { return last_[static_cast<size_t>(b)]; }

  // The heads of pieces [p0, p1) as spans (piece-major); a piece for which
  // `skip` holds keeps its heads with no rows.
  template <typename Skip>
  FavorPieces spans(int64_t p0, int64_t p1, Skip skip) const {
    std::vector<FavorSpan> out;
    for (int64_t p = p0; p < p1; ++p) append(out, p, !skip(p));
    return FavorPieces(ctx_, std::move(out));
  }
  FavorPieces spans(int64_t p0, int64_t p1) const {
    return spans(p0, p1, [](int64_t) { return false; });
  }
  // One piece per entry of `which` (-1: no rows), in that order.
  FavorPieces spans_of(const std::vector<int64_t>& which) const {
    std::vector<FavorSpan> out;
    for (int64_t p : which) append(out, std::max<int64_t>(p, 0), p >= 0);
    return FavorPieces(ctx_, std::move(out));
  }
  // Per sample: its first piece where it waits for the prefix, else -1.
  std::vector<int64_t> continuing_firsts() const {
    std::vector<int64_t> out;
    for (int64_t b = 0; b < B_; ++b) out.push_back(waits(first_piece(b), true, false) ? first_piece(b) : -1);
    return out;
  }
  // The pieces that wait for both scans at their slots of saved.piece_state (-1: none).
  std::vector<int64_t> slotted() const {
    std::vector<int64_t> out(static_cast<size_t>(2 * B_), -1);
    for (int64_t p = 0; p < static_cast<int64_t>(pieces_.size()); ++p)
      if (waits(p, true, true)) out[static_cast<size_t>(slot(p))] = p;
    return out;
  }
  FavorShape shape(const FavorPieces& pieces) const {
    return favor_pieces_shape(attention_favor_shape(cfg_, H_, n_), pieces);
  }

  // [count * H, ss] states; identity when `clear`.
  Tensor states(int64_t count, const char* tag, bool clear) const {
    Tensor t = Tensor::empty({count * H_, ss_}, DType::f32, *ctx_.tracker, tag);
    if (clear) {
      LinAttnShape s;
      s.heads = count * H_;
      s.m = cfg_.features;
      s.d = D_;
      linear_attention_state_clear(ctx_, s, t.data<float>());
    }
    return t;
  }
  // The H states of entry i of [count, H, ss] states.
  float* state(const Tensor& t, int64_t i) const { return const_cast<float*>(t.data<float>()) + i * H_ * ss_; }
  void copy_state(float* dst, const float* src) const {
    copy_bytes(ctx_.stream, dst, ctx_.device, src, ctx_.device, H_ * ss_ * 4);
  }
  void combine(const float* earlier, const float* later, float* out) const {
    linear_attention_state_combine(ctx_, H_, cfg_.features, D_, earlier, later, out);
  }
  // The sequence totals at the slots of pieces that wait for both scans:
  // prefix (+) own for a first piece that continues, own (+) suffix for a last.
  void complete_slots(const Tensor& slots, const Tensor& prefix, const Tensor& suffix) const {
    for (int64_t p = 0; p < static_cast<int64_t>(pieces_.size()); ++p) {
      if (!waits(p, true, true)) continue;
      const PieceInfo& x = pieces_[static_cast<size_t>(p)];
      float* total = state(slots, slot(p));
      if (x.first_continues) combine(state(prefix, x.b), total, total);
      if (x.last) combine(total, state(suffix, x.b), total);
    }
  }

  // out = the segmented exclusive scan of the per-sample states over the sequence group.
  void scan(const float* states, float* out, ScanDirection direction, AttentionTiming& t) const {
    const int64_t heads = B_ * H_, g = ss_ + 1;
    std::vector<float> flags(static_cast<size_t>(heads));
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t h = 0; h < H_; ++h) flags[static_cast<size_t>(b * H_ + h)] = layout_.starts_sequence(b) ? 1.f : 0.f;
    MemoryTracker& tr = *ctx_.tracker;
    Tensor flag_rows = Tensor::empty({heads}, DType::f32, tr, "attention.scan_flags");
    Tensor send = Tensor::empty({heads, g}, DType::f32, tr, "attention.scan_send");
    Tensor recv = Tensor::empty({heads, g}, DType::f32, tr, "attention.scan_recv");
    copy_bytes(ctx_.stream, flag_rows.raw(), ctx_.device, flags.data(), Device::cpu(), heads * 4);
    copy_rows(ctx_.stream, send.raw(), g * 4, flag_rows.raw(), 4, 4, heads, ctx_.device);
    copy_rows(ctx_.stream, send.data<float>() + 1, g * 4, states, ss_ * 4, ss_ * 4, heads, ctx_.device);
    const SegmentedStateCombine segmented(ctx_, cfg_.features, D_);
    const ScanOptions so = attention_scan_options(opt_, ctx_, direction);
    CommPhase phase(ctx_, *sp_);
    exclusive_scan(*sp_, send.raw(), recv.raw(), heads * g, segmented, so);
    phase.issued();
    phase.join();
    copy_rows(ctx_.stream, out, ss_ * 4, recv.data<float>() + 1, g * 4, ss_ * 4, heads, ctx_.device);
    // The host flags must outlive their copy: a CPU stream may run it later;
    // CUDA has staged pageable memory when cudaMemcpyAsync returns.
    if (ctx_.device.is_cpu()) synchronize(ctx_.stream);
    phase.add_times(t);
  }

 private:
  void append(std::vector<FavorSpan>& out, int64_t p, bool rows) const {
    const PieceInfo& x = pieces_[static_cast<size_t>(p)];
    for (int64_t h = 0; h < H_; ++h) out.push_back(FavorSpan{(x.b * H_ + h) * n_ + x.begin, rows ? x.len : 0, h});
  }
  const ModelConfig& cfg_;
  Communicator* sp_;
  const AttentionOptions& opt_;
  const ExecContext& ctx_;
  const PackedLayout& layout_;
  int64_t H_, B_, n_, D_, ss_;
  bool distributed_;
  std::vector<PieceInfo> pieces_;
  std::vector<int64_t> first_, last_;  // per sample
};

// Exact softmax over the pieces: one call over every head of every piece,
// in place (SoftmaxAttentionParams::pieces).
SoftmaxAttentionParams pieces_params(const ModelConfig& cfg, const RowSpans& spans) {
  return softmax_pieces_params(attention_softmax_params(cfg, 1, spans.longest()), spans);
}

void softmax_pieces(const ModelConfig& cfg, const PackedPass& pass, const float* q, const float* k, const float* v,
                    AttentionSaved& saved) {
  const RowSpans spans(pass.ctx(), pass.head_spans());
  softmax_attention_forward(pass.ctx(), pieces_params(cfg, spans), q, k, v, saved.o.data<float>(),
                            saved.lse.data<float>());
}

void softmax_pieces_backward(const ModelConfig& cfg, const PackedPass& pass, const float* q, const float* k,
                             const float* v, const AttentionSaved& saved, const float* d_o, float* dq, float* dk,
                             float* dv) {
  const RowSpans spans(pass.ctx(), pass.head_spans());
  softmax_attention_backward(pass.ctx(), pieces_params(cfg, spans), q, k, v, saved.o.data<float>(),
                             saved.lse.data<float>(), d_o, dq, dk, dv);
}

}  // namespace

void packed_attention_forward(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt,
                              const ExecContext& ctx, int64_t heads, int64_t n, const PackedLayout& layout,
                              const float* W, const float* q, const float* k, const float* v, AttentionSaved& saved,
                              AttentionTiming* timing) {
  const PackedPass pass(cfg, sp, opt, ctx, heads, n, layout);
  const int64_t D = cfg.head_dim(), B = heads / cfg.heads;
  MemoryTracker& tr = *ctx.tracker;
  AttentionTiming t;
  const double t0 = seconds_now();
  saved.o = Tensor::empty({heads, n, D}, DType::f32, tr, "attention.o");
  if (cfg.attention == AttentionKind::Softmax) {
    PF_REQUIRE(ConfigError, !pass.distributed(),
               "model.attention = softmax needs the whole sequence on one rank, but the sequence group has "
                   << sp->size() << " ranks (use favor, relu or elu, or sp = 1)");
    saved.lse = Tensor::empty({heads, n}, DType::f32, tr, "attention.lse");
    softmax_pieces(cfg, pass, q, k, v, saved);
    end_attention_timing(ctx, t, t0, timing);
    return;
  }
  const bool causal = cfg.causal();
  saved.den = Tensor::empty({heads, n}, DType::f32, tr, "attention.den");
  saved.row_scale = Tensor::empty({heads, n}, DType::f32, tr, "attention.row_scale");
  Tensor y = Tensor::empty({heads, n, D + 1}, DType::f32, tr, "attention.y");
  float* yp = y.data<float>();
  float* rs = saved.row_scale.data<float>();
  // causal: the prefix of each sample's first piece; bidirectional: the
  // sequence totals of the pieces that take part in the scans.
  if (causal)
    saved.state = pass.states(B, "attention.state", true);
  else
    saved.piece_state = pass.states(2 * B, "attention.piece_state", false);
  const Tensor last = pass.states(B, "attention.last_piece_state", true);
  const Tensor first = causal ? Tensor() : pass.states(B, "attention.first_piece_state", true);
  pass.each_call([&](int64_t p0, int64_t p1) {
    const FavorPieces pieces = pass.spans(p0, p1);
    const FavorShape fs = pass.shape(pieces);
    const Tensor totals = pass.states(p1 - p0, "attention.piece_total", false);
    if (causal) {
      favor_causal_forward_local(ctx, fs, q, k, v, W, yp, rs, totals.data<float>());
    } else {
      favor_key_state(ctx, fs, k, v, W, totals.data<float>());
      // Pieces that wait for the scans are finished again after them.
      favor_bidirectional_forward_finish(ctx, fs, q, W, totals.data<float>(), yp, rs);
    }
    for (int64_t p = p0; p < p1; ++p) {
      const PieceInfo& x = pass.pieces()[static_cast<size_t>(p)];
      const float* own = pass.state(totals, p - p0);
      if (x.last) pass.copy_state(pass.state(last, x.b), own);
      if (causal) continue;
      if (x.first_continues) pass.copy_state(pass.state(first, x.b), own);
      if (pass.waits(p, true, true)) pass.copy_state(pass.state(saved.piece_state, pass.slot(p)), own);
    }
  });
  if (pass.distributed()) {
    if (causal) {
      pass.scan(last.data<float>(), saved.state.data<float>(), ScanDirection::Forward, t);
      const FavorPieces firsts = pass.spans_of(pass.continuing_firsts());
      favor_add_prefix(ctx, pass.shape(firsts), q, W, saved.state.data<float>(), yp, rs);
    } else {
      const Tensor prefix = pass.states(B, "attention.prefix", true), suffix = pass.states(B, "attention.suffix", true);
      pass.scan(last.data<float>(), prefix.data<float>(), ScanDirection::Forward, t);
      pass.scan(first.data<float>(), suffix.data<float>(), ScanDirection::Reverse, t);
      pass.complete_slots(saved.piece_state, prefix, suffix);
      const FavorPieces slotted = pass.spans_of(pass.slotted());
      favor_bidirectional_forward_finish(ctx, pass.shape(slotted), q, W, saved.piece_state.data<float>(), yp, rs);
    }
  }
  linear_attention_normalize(ctx, attention_favor_shape(cfg, heads, n).lin(), yp, saved.o.data<float>(),
                             saved.den.data<float>());
  end_attention_timing(ctx, t, t0, timing);
}

void packed_attention_backward(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt,
                               const ExecContext& ctx, int64_t heads, int64_t n, const PackedLayout& layout,
                               const float* W, const float* q, const float* k, const float* v,
                               const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                               float* dW, AttentionTiming* timing) {
  const PackedPass pass(cfg, sp, opt, ctx, heads, n, layout);
  const int64_t B = heads / cfg.heads;
  AttentionTiming t;
  const double t0 = seconds_now();
  if (cfg.attention == AttentionKind::Softmax) {
    softmax_pieces_backward(cfg, pass, q, k, v, saved, d_o, dq, dk, dv);
    end_attention_timing(ctx, t, t0, timing);
    return;
  }
  const bool causal = cfg.causal();
  const float *o = saved.o.data<float>(), *den = saved.den.data<float>(), *rs = saved.row_scale.data<float>();
  const Tensor last = causal ? Tensor() : pass.states(B, "attention.last_piece_grad", true);
  const Tensor first = pass.states(B, "attention.first_piece_grad", true);
  // Bidirectional, distributed: the gradient states of the pieces that wait
  // for both scans, at their slots.
  const Tensor waiting = !causal && pass.distributed() ? pass.states(2 * B, "attention.waiting_grad", false) : Tensor();
  pass.each_call([&](int64_t p0, int64_t p1) {
    const FavorPieces pieces = pass.spans(p0, p1);
    const FavorShape fs = pass.shape(pieces);
    const Tensor grads = pass.states(p1 - p0, "attention.grad_total", false);
    if (causal) {
      // The forward prefix of earlier ranks for first pieces that continue; the identity elsewhere.
      Tensor prefix;
      if (pass.distributed()) {
        prefix = pass.states(p1 - p0, "attention.piece_prefix", true);
        for (int64_t p = p0; p < p1; ++p)
          if (pass.waits(p, true, false))
            pass.copy_state(pass.state(prefix, p - p0),
                            pass.state(saved.state, pass.pieces()[static_cast<size_t>(p)].b));
      }
      favor_causal_backward_local(ctx, fs, q, k, v, W, o, den, rs, d_o,
                                  prefix.defined() ? prefix.data<float>() : nullptr, dq, dk, dv, grads.data<float>(),
                                  dW);
      for (int64_t p = p0; p < p1; ++p) {
        const PieceInfo& x = pass.pieces()[static_cast<size_t>(p)];
        if (x.first_continues) pass.copy_state(pass.state(first, x.b), pass.state(grads, p - p0));
      }
    } else {
      // The sequence totals: made again from the pieces' keys, and for the
      // pieces that took part in the scans the ones the forward kept.
      const Tensor totals = pass.states(p1 - p0, "attention.piece_total", false);
      favor_key_state(ctx, fs, k, v, W, totals.data<float>());
      for (int64_t p = p0; p < p1; ++p)
        if (pass.waits(p, true, true))
          pass.copy_state(pass.state(totals, p - p0), pass.state(saved.piece_state, pass.slot(p)));
      favor_bidirectional_backward_local(ctx, fs, q, W, o, den, rs, d_o, totals.data<float>(), dq, grads.data<float>(),
                                         dW);
      for (int64_t p = p0; p < p1; ++p) {
        const PieceInfo& x = pass.pieces()[static_cast<size_t>(p)];
        const float* G = pass.state(grads, p - p0);
        if (x.last) pass.copy_state(pass.state(last, x.b), G);
        if (x.first_continues) pass.copy_state(pass.state(first, x.b), G);
        if (pass.waits(p, true, true)) pass.copy_state(pass.state(waiting, pass.slot(p)), G);
      }
      // The pieces that wait keep their dk, dv (and dW) for the scans' results.
      const FavorPieces finishing = pass.spans(p0, p1, [&](int64_t p) { return pass.waits(p, true, true); });
      favor_bidirectional_backward_finish(ctx, pass.shape(finishing), k, v, W, grads.data<float>(), dk, dv, dW);
    }
  });
  if (pass.distributed()) {
    const Tensor suffix = pass.states(B, "attention.suffix", true);
    pass.scan(first.data<float>(), suffix.data<float>(), ScanDirection::Reverse, t);
    if (causal) {
      std::vector<int64_t> lasts;
      for (int64_t b = 0; b < B; ++b) lasts.push_back(pass.last_piece(b));
      const FavorPieces ends = pass.spans_of(lasts);
      favor_backward_add_suffix(ctx, pass.shape(ends), k, v, W, suffix.data<float>(), dk, dv, dW);
    } else {
      const Tensor prefix = pass.states(B, "attention.prefix", true);
      pass.scan(last.data<float>(), prefix.data<float>(), ScanDirection::Forward, t);
      pass.complete_slots(waiting, prefix, suffix);
      const FavorPieces slotted = pass.spans_of(pass.slotted());
      favor_bidirectional_backward_finish(ctx, pass.shape(slotted), k, v, W, waiting.data<float>(), dk, dv, dW);
    }
  }
  end_attention_timing(ctx, t, t0, timing);
}

}  // namespace pf
