// Packed attention (model/packed_layout.h): every piece of a sample's slice,
// the rows [H, len, D] of one sequence, runs through the same kernels as an
// unpacked block of len positions, so a sequence attends to itself only.
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
//   key states in the forward and of gradient states in the backward.
// softmax (one rank only): each piece its own exact attention.
// exp: every piece is [H, len, D], so its per-head dW [H, m, D] accumulates
//   straight into the layer's gradient.
// A piece that is the whole slice of its sample is used in place; others are
// copied to [H, len, ...] buffers and their results copied back.
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention_comm.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {
namespace {

struct Rows {
  float* p = nullptr;
  Tensor keep;  // the copy, when the rows are not used in place
};

// Rows [begin, begin + len) of sample b of [B*H, n, width] buffers, as [H, len, width].
class PieceView {
 public:
  PieceView(const ExecContext& ctx, int64_t H, int64_t n, int64_t b, int64_t begin, int64_t len)
      : ctx_(&ctx), H_(H), n_(n), b_(b), begin_(begin), len_(len) {}
  int64_t len() const { return len_; }
  // The rows, for reading.
  Rows get(const float* full, int64_t width, const char* tag) const {
    Rows r = make(const_cast<float*>(full), width, tag);
    if (r.keep.defined())
      copy_rows(ctx_->stream, r.p, len_ * width * 4, at(full, width), n_ * width * 4, len_ * width * 4, H_,
                ctx_->device);
    return r;
  }
  // A buffer for the rows, for writing; put() stores it into `full`.
  Rows make(float* full, int64_t width, const char* tag) const {
    if (len_ == n_) return {const_cast<float*>(at(full, width)), Tensor()};
    Rows r;
    r.keep = Tensor::empty({H_, len_, width}, DType::f32, *ctx_->tracker, tag);
    r.p = r.keep.data<float>();
    return r;
  }
  void put(const Rows& r, float* full, int64_t width) const {
    if (r.keep.defined())
      copy_rows(ctx_->stream, const_cast<float*>(at(full, width)), n_ * width * 4, r.p, len_ * width * 4,
                len_ * width * 4, H_, ctx_->device);
  }

 private:
  const float* at(const float* full, int64_t width) const { return full + (b_ * H_ * n_ + begin_) * width; }
  const ExecContext* ctx_;
  int64_t H_, n_, b_, begin_, len_;
};

// One piece of the layout, with what the work on it keeps until the scans are done.
struct Piece {
  int64_t b = 0;
  size_t i = 0;
  bool first_continues = false;  // the first piece, continuing a sequence of an earlier rank
  bool last = false;             // the sample's last piece
  PieceView view;
  FavorShape fs;
  Rows q, k, v, y, rs, dk, dv;
  float* state = nullptr;  // [H, ss]: the piece's key or gradient state
  Tensor state_keep;
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
  }
  bool distributed() const { return distributed_; }
  int64_t state_size() const { return ss_; }
  const ExecContext& ctx() const { return ctx_; }

  // Every piece in order: f(b, i, PieceView).
  template <typename F>
  void each_piece(F f) const {
    for (int64_t b = 0; b < B_; ++b) {
      const std::vector<SequencePiece>& p = layout_.samples[static_cast<size_t>(b)];
      for (size_t i = 0; i < p.size(); ++i)
        f(b, i, PieceView(ctx_, H_, n_, b, p[i].begin, layout_.piece_length(b, i, n_)));
    }
  }
  Piece piece(int64_t b, size_t i, const PieceView& view) const {
    const std::vector<SequencePiece>& p = layout_.samples[static_cast<size_t>(b)];
    Piece x{b,
            i,
            i == 0 && !p[0].starts(),
            i + 1 == p.size(),
            view,
            attention_favor_shape(cfg_, H_, view.len()),
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            nullptr,
            Tensor()};
    return x;
  }
  // Whether the piece needs the scans' results before it can finish.
  bool waits(const Piece& x, bool prefix, bool suffix) const {
    return distributed_ && ((prefix && x.first_continues) || (suffix && x.last));
  }
  // Per-sample states [B*H, ss], all identity.
  Tensor states(const char* tag) const {
    Tensor t = Tensor::empty({B_ * H_, ss_}, DType::f32, *ctx_.tracker, tag);
    LinAttnShape s;
    s.heads = B_ * H_;
    s.m = cfg_.features;
    s.d = D_;
    linear_attention_state_clear(ctx_, s, t.data<float>());
    return t;
  }
  float* sample_state(Tensor& t, int64_t b) const { return t.data<float>() + b * H_ * ss_; }
  const float* sample_state(const Tensor& t, int64_t b) const { return t.data<float>() + b * H_ * ss_; }
  void copy_state(float* dst, const float* src) const {
    copy_bytes(ctx_.stream, dst, ctx_.device, src, ctx_.device, H_ * ss_ * 4);
  }
  float* new_state(Piece& x, const char* tag) const {
    x.state_keep = Tensor::empty({H_, ss_}, DType::f32, *ctx_.tracker, tag);
    x.state = x.state_keep.data<float>();
    return x.state;
  }
  void combine(const float* earlier, const float* later, float* out) const {
    linear_attention_state_combine(ctx_, H_, cfg_.features, D_, earlier, later, out);
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
    ScanOptions so;
    so.direction = direction;
    so.algorithm = opt_.scan;
    so.tracker = ctx_.tracker;
    CommPhase phase(ctx_, *sp_);
    exclusive_scan(*sp_, send.raw(), recv.raw(), heads * g, segmented, so);
    phase.issued();
    phase.join();
    copy_rows(ctx_.stream, out, ss_ * 4, recv.data<float>() + 1, g * 4, ss_ * 4, heads, ctx_.device);
    // The host flags must outlive their copy: a CPU stream may run it later;
    // CUDA has staged pageable memory when cudaMemcpyAsync returns.
    if (ctx_.device.is_cpu()) synchronize(ctx_.stream);
    AttentionTiming pt;
    phase.times(pt);
    t.comm += pt.comm;
    t.comm_wait += pt.comm_wait;
  }

  // o, den (and row_scale, kept in the piece) of a finished piece from its y.
  void finish(const Piece& x, AttentionSaved& saved) const {
    Rows o = x.view.make(saved.o.data<float>(), D_, "attention.piece_o");
    Rows den = x.view.make(saved.den.data<float>(), 1, "attention.piece_den");
    linear_attention_normalize(ctx_, x.fs.lin(), x.y.p, o.p, den.p);
    x.view.put(o, saved.o.data<float>(), D_);
    x.view.put(den, saved.den.data<float>(), 1);
    x.view.put(x.rs, saved.row_scale.data<float>(), 1);
  }
  // The slot of saved.piece_state [2 B, H, ss] that keeps the sequence total
  // of a piece that takes part in the scans: the first piece's, or the last's.
  float* total_slot(const Tensor& piece_state, const Piece& x) const {
    return const_cast<float*>(piece_state.data<float>()) + (2 * x.b + (x.first_continues ? 0 : 1)) * H_ * ss_;
  }
  int64_t H() const { return H_; }
  int64_t D() const { return D_; }

 private:
  const ModelConfig& cfg_;
  Communicator* sp_;
  const AttentionOptions& opt_;
  const ExecContext& ctx_;
  const PackedLayout& layout_;
  int64_t H_, B_, n_, D_, ss_;
  bool distributed_;
};

// Ends a call's timing once its work is done: compute is the wall time less
// the communication the compute stream waited for.
void end_timing(const ExecContext& ctx, AttentionTiming t, double t0, AttentionTiming* timing) {
  synchronize(ctx.stream);
  t.compute = seconds_now() - t0 - t.comm_wait;
  if (timing) *timing = t;
}

void softmax_pieces(const ModelConfig& cfg, const PackedPass& pass, const float* q, const float* k, const float* v,
                    AttentionSaved& saved) {
  const int64_t D = pass.D();
  const ExecContext& ctx = pass.ctx();
  pass.each_piece([&](int64_t, size_t, const PieceView& view) {
    const Rows qs = view.get(q, D, "attention.piece_q"), ks = view.get(k, D, "attention.piece_k"),
               vs = view.get(v, D, "attention.piece_v");
    Rows o = view.make(saved.o.data<float>(), D, "attention.piece_o");
    Rows lse = view.make(saved.lse.data<float>(), 1, "attention.piece_lse");
    softmax_attention_forward(ctx, attention_softmax_params(cfg, pass.H(), view.len()), qs.p, ks.p, vs.p, o.p, lse.p);
    view.put(o, saved.o.data<float>(), D);
    view.put(lse, saved.lse.data<float>(), 1);
  });
}

}  // namespace

void packed_attention_forward(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt,
                              const ExecContext& ctx, int64_t heads, int64_t n, const PackedLayout& layout,
                              const float* W, const float* q, const float* k, const float* v, AttentionSaved& saved,
                              AttentionTiming* timing) {
  const PackedPass pass(cfg, sp, opt, ctx, heads, n, layout);
  const int64_t D = cfg.head_dim(), H = cfg.heads;
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
    end_timing(ctx, t, t0, timing);
    return;
  }
  const bool causal = cfg.causal();
  const int64_t ss = pass.state_size();
  saved.den = Tensor::empty({heads, n}, DType::f32, tr, "attention.den");
  saved.row_scale = Tensor::empty({heads, n}, DType::f32, tr, "attention.row_scale");
  // causal: the prefix of each sample's first piece; bidirectional: the
  // sequence totals of the pieces that take part in the scans.
  if (causal)
    saved.state = pass.states("attention.state");
  else
    saved.piece_state = Tensor::empty({2 * heads / H, H, ss}, DType::f32, tr, "attention.piece_state");
  Tensor last = pass.states("attention.last_piece_state");
  Tensor first = causal ? Tensor() : pass.states("attention.first_piece_state");
  std::vector<Piece> waiting;
  pass.each_piece([&](int64_t b, size_t i, const PieceView& view) {
    Piece x = pass.piece(b, i, view);
    x.q = view.get(q, D, "attention.piece_q");
    const Rows ks = view.get(k, D, "attention.piece_k"), vs = view.get(v, D, "attention.piece_v");
    x.y.keep = Tensor::empty({H, view.len(), D + 1}, DType::f32, tr, "attention.y");
    x.y.p = x.y.keep.data<float>();
    x.rs = view.make(saved.row_scale.data<float>(), 1, "attention.piece_row_scale");
    if (causal) {
      float* total = x.last ? pass.sample_state(last, b) : pass.new_state(x, "attention.block_total");
      favor_causal_forward_local(ctx, x.fs, x.q.p, ks.p, vs.p, W, x.y.p, x.rs.p, total);
      if (pass.waits(x, true, false))
        waiting.push_back(std::move(x));
      else
        pass.finish(x, saved);
    } else {
      x.state = pass.waits(x, true, true) ? pass.total_slot(saved.piece_state, x)
                                          : pass.new_state(x, "attention.piece_total");
      favor_key_state(ctx, x.fs, ks.p, vs.p, W, x.state);
      if (x.last) pass.copy_state(pass.sample_state(last, b), x.state);
      if (x.first_continues) pass.copy_state(pass.sample_state(first, b), x.state);
      if (pass.waits(x, true, true)) {
        waiting.push_back(std::move(x));
      } else {
        favor_bidirectional_forward_finish(ctx, x.fs, x.q.p, W, x.state, x.y.p, x.rs.p);
        pass.finish(x, saved);
      }
    }
  });
  if (pass.distributed()) {
    if (causal) {
      pass.scan(last.data<float>(), saved.state.data<float>(), ScanDirection::Forward, t);
    } else {
      Tensor prefix = pass.states("attention.prefix"), suffix = pass.states("attention.suffix");
      pass.scan(last.data<float>(), prefix.data<float>(), ScanDirection::Forward, t);
      pass.scan(first.data<float>(), suffix.data<float>(), ScanDirection::Reverse, t);
      for (Piece& x : waiting) {
        if (x.first_continues) pass.combine(pass.sample_state(prefix, x.b), x.state, x.state);
        if (x.last) pass.combine(x.state, pass.sample_state(suffix, x.b), x.state);
      }
    }
  }
  for (Piece& x : waiting) {
    if (causal)
      favor_add_prefix(ctx, x.fs, x.q.p, W, pass.sample_state(saved.state, x.b), x.y.p, x.rs.p);
    else
      favor_bidirectional_forward_finish(ctx, x.fs, x.q.p, W, x.state, x.y.p, x.rs.p);
    pass.finish(x, saved);
  }
  end_timing(ctx, t, t0, timing);
}

void packed_attention_backward(const ModelConfig& cfg, Communicator* sp, const AttentionOptions& opt,
                               const ExecContext& ctx, int64_t heads, int64_t n, const PackedLayout& layout,
                               const float* W, const float* q, const float* k, const float* v,
                               const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                               float* dW, AttentionTiming* timing) {
  const PackedPass pass(cfg, sp, opt, ctx, heads, n, layout);
  const int64_t D = cfg.head_dim(), H = cfg.heads;
  AttentionTiming t;
  const double t0 = seconds_now();
  if (cfg.attention == AttentionKind::Softmax) {
    pass.each_piece([&](int64_t, size_t, const PieceView& view) {
      const Rows qs = view.get(q, D, "attention.piece_q"), ks = view.get(k, D, "attention.piece_k"),
                 vs = view.get(v, D, "attention.piece_v"), os = view.get(saved.o.data<float>(), D, "attention.piece_o"),
                 ls = view.get(saved.lse.data<float>(), 1, "attention.piece_lse"),
                 dos = view.get(d_o, D, "attention.piece_grad_o");
      Rows dqs = view.make(dq, D, "attention.piece_dq"), dks = view.make(dk, D, "attention.piece_dk"),
           dvs = view.make(dv, D, "attention.piece_dv");
      softmax_attention_backward(ctx, attention_softmax_params(cfg, H, view.len()), qs.p, ks.p, vs.p, os.p, ls.p, dos.p,
                                 dqs.p, dks.p, dvs.p);
      view.put(dqs, dq, D);
      view.put(dks, dk, D);
      view.put(dvs, dv, D);
    });
    end_timing(ctx, t, t0, timing);
    return;
  }
  const bool causal = cfg.causal();
  const int64_t ss = pass.state_size();
  Tensor last = causal ? Tensor() : pass.states("attention.last_piece_grad");
  Tensor first = pass.states("attention.first_piece_grad");
  std::vector<Piece> waiting;
  pass.each_piece([&](int64_t b, size_t i, const PieceView& view) {
    Piece x = pass.piece(b, i, view);
    const Rows qs = view.get(q, D, "attention.piece_q"), os = view.get(saved.o.data<float>(), D, "attention.piece_o"),
               dens = view.get(saved.den.data<float>(), 1, "attention.piece_den"),
               rss = view.get(saved.row_scale.data<float>(), 1, "attention.piece_row_scale"),
               dos = view.get(d_o, D, "attention.piece_grad_o");
    x.k = view.get(k, D, "attention.piece_k");
    x.v = view.get(v, D, "attention.piece_v");
    Rows dqs = view.make(dq, D, "attention.piece_dq");
    x.dk = view.make(dk, D, "attention.piece_dk");
    x.dv = view.make(dv, D, "attention.piece_dv");
    if (causal) {
      float* U = x.first_continues ? pass.sample_state(first, b) : pass.new_state(x, "attention.grad_total");
      const float* prefix = pass.distributed() && x.first_continues ? pass.sample_state(saved.state, b) : nullptr;
      favor_causal_backward_local(ctx, x.fs, qs.p, x.k.p, x.v.p, W, os.p, dens.p, rss.p, dos.p, prefix, dqs.p, x.dk.p,
                                  x.dv.p, U, dW);
      view.put(dqs, dq, D);
      if (pass.waits(x, false, true)) {
        waiting.push_back(std::move(x));
      } else {
        view.put(x.dk, dk, D);
        view.put(x.dv, dv, D);
      }
    } else {
      // The sequence total: kept by the forward for the pieces that took
      // part in the scans, made again from the piece's keys for the others.
      Tensor own;
      const float* total = nullptr;
      if (pass.waits(x, true, true)) {
        total = pass.total_slot(saved.piece_state, x);
      } else {
        own = Tensor::empty({H, ss}, DType::f32, *ctx.tracker, "attention.piece_total");
        favor_key_state(ctx, x.fs, x.k.p, x.v.p, W, own.data<float>());
        total = own.data<float>();
      }
      float* G = pass.new_state(x, "attention.grad_total");
      favor_bidirectional_backward_local(ctx, x.fs, qs.p, W, os.p, dens.p, rss.p, dos.p, total, dqs.p, G, dW);
      view.put(dqs, dq, D);
      if (x.last) pass.copy_state(pass.sample_state(last, b), G);
      if (x.first_continues) pass.copy_state(pass.sample_state(first, b), G);
      if (pass.waits(x, true, true)) {
        waiting.push_back(std::move(x));
      } else {
        favor_bidirectional_backward_finish(ctx, x.fs, x.k.p, x.v.p, W, G, x.dk.p, x.dv.p, dW);
        view.put(x.dk, dk, D);
        view.put(x.dv, dv, D);
      }
    }
  });
  if (pass.distributed()) {
    Tensor suffix = pass.states("attention.suffix");
    pass.scan(first.data<float>(), suffix.data<float>(), ScanDirection::Reverse, t);
    Tensor prefix;
    if (!causal) {
      prefix = pass.states("attention.prefix");
      pass.scan(last.data<float>(), prefix.data<float>(), ScanDirection::Forward, t);
    }
    for (Piece& x : waiting) {
      if (causal) {
        favor_backward_add_suffix(ctx, x.fs, x.k.p, x.v.p, W, pass.sample_state(suffix, x.b), x.dk.p, x.dv.p, dW);
      } else {
        if (x.first_continues) pass.combine(pass.sample_state(prefix, x.b), x.state, x.state);
        if (x.last) pass.combine(x.state, pass.sample_state(suffix, x.b), x.state);
        favor_bidirectional_backward_finish(ctx, x.fs, x.k.p, x.v.p, W, x.state, x.dk.p, x.dv.p, dW);
      }
      x.view.put(x.dk, dk, D);
      x.view.put(x.dv, dv, D);
    }
  }
  end_timing(ctx, t, t0, timing);
}

}  // namespace pf
