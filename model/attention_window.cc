// The local softmax window (model.window) across the ranks of a sequence
// group. Query i attends to the keys less than w = model.window rows away
// (causal: before it or at it), so a rank needs the h = w - 1 rows of keys
// and values of its sequence on each side of its slice: its halo, the last h
// rows of the previous rank (and, bidirectional, the first h rows of the
// next). h <= the local rows n, so a halo comes from one neighbour.
//
// Each rank sends its last h rows of k and v to the next rank (and its first
// h rows to the previous one), with per sample how many of them belong to
// the sequence that crosses the edge: min(h, its last piece's rows), and for
// the first rows min(h, its first piece's rows) when that piece continues a
// sequence of an earlier rank, else 0. A piece that takes part (a sample's
// first piece that continues an earlier rank's sequence, its last piece
// when the next rank's first one continues it) runs as one block
//   [the halo rows before | its own rows | the halo rows after]
// through the windowed softmax kernels, with zero queries for the halo rows
// (their outputs are dropped, and in the backward their zero output
// gradients give no gradient at all). The halo rows' key and value
// gradients go back to the rank that owns them and are added there. Packed
// and family slices run piece by piece (their state segments: a window
// crosses members of a family, never proteins or families): the pieces
// without halo rows, every head of each, in one call in place
// (SoftmaxAttentionParams::pieces), the others as blocks of their own.
#include <algorithm>
#include <vector>

#include "kernels/residual/residual.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "model/attention_comm.h"
#include "model/packed_layout.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {
namespace {

// Rows [begin, begin + len) of sample b, with `before` and `after` halo rows.
struct HaloPiece {
  int64_t b = 0, begin = 0, len = 0, before = 0, after = 0;
  bool first_continues = false;  // the sample's first piece, continuing an earlier rank's sequence
  bool last = false;             // the sample's last piece
  int64_t rows() const { return before + len + after; }
};

class WindowPass {
 public:
  WindowPass(const ModelConfig& cfg, Communicator& sp, const ExecContext& ctx, int64_t heads, int64_t n,
             const PackedLayout& layout)
      : cfg_(cfg),
        sp_(sp),
        ctx_(ctx),
        H_(cfg.heads),
        B_(heads / cfg.heads),
        n_(n),
        D_(cfg.head_dim()),
        h_(cfg.window - 1),
        causal_(cfg.causal()),
        prev_(sp.rank() > 0 ? sp.rank() - 1 : -1),
        next_(sp.rank() + 1 < sp.size() ? sp.rank() + 1 : -1) {
    PF_REQUIRE(ConfigError, h_ <= n,
               "model.window = " << cfg.window << " needs window - 1 <= the rows of each rank of the sequence group, "
                                 << n << " here (a longer sample, fewer ranks or a shorter window)");
    if (!layout.empty()) layout.check(B_, n);
    for (int64_t b = 0; b < B_; ++b) {
      if (layout.empty()) {
        pieces_.push_back(HaloPiece{b, 0, n, 0, 0, prev_ >= 0, true});
        continue;
      }
      const std::vector<SequencePiece>& p = layout.samples[static_cast<size_t>(b)];
      for (size_t i = 0; i < p.size(); ++i)
        pieces_.push_back(
            HaloPiece{b, p[i].begin, layout.piece_length(b, i, n), 0, 0, i == 0 && !p[0].starts(), i + 1 == p.size()});
    }
  }

  // The neighbours' halo rows of k and v (recv_before_, recv_after_) and,
  // from their counts, every piece's before and after.
  void exchange(const float* k, const float* v, AttentionTiming& t) {
    std::vector<float> tail(static_cast<size_t>(B_), 0.f), head(static_cast<size_t>(B_), 0.f);
    for (const HaloPiece& x : pieces_) {
      if (x.last) tail[static_cast<size_t>(x.b)] = static_cast<float>(std::min(h_, x.len));
      if (x.first_continues) head[static_cast<size_t>(x.b)] = static_cast<float>(std::min(h_, x.len));
    }
    const Tensor send_next = halo_of(k, v, n_ - h_, tail, "attention.halo_send");
    recv_before_ = halo("attention.halo_before");
    Tensor send_prev;
    if (!causal_) {
      send_prev = halo_of(k, v, 0, head, "attention.halo_send");
      recv_after_ = halo("attention.halo_after");
    }
    send_both(send_next, recv_before_, send_prev, recv_after_, t);
    // The counts: how many of the received rows continue this slice's sequences.
    const std::vector<float> before = counts(recv_before_, prev_), after = counts(recv_after_, next_);
    for (HaloPiece& x : pieces_) {
      x.before = x.first_continues ? static_cast<int64_t>(before[static_cast<size_t>(x.b)]) : 0;
      x.after = x.last && !causal_ ? static_cast<int64_t>(after[static_cast<size_t>(x.b)]) : 0;
    }
  }

  const std::vector<HaloPiece>& pieces() const { return pieces_; }
  int64_t H() const { return H_; }
  int64_t D() const { return D_; }
  int64_t n() const { return n_; }
  const ExecContext& ctx() const { return ctx_; }
  SoftmaxAttentionParams params(const HaloPiece& x) const { return attention_softmax_params(cfg_, H_, x.rows()); }
  // Whether piece x has halo rows: it runs as a block of its own; the others
  // run in place, all in one call (local_spans).
  static bool has_halo(const HaloPiece& x) { return x.before > 0 || x.after > 0; }
  // The rows of every head of each piece without halo rows.
  std::vector<RowSpan> local_spans() const {
    std::vector<RowSpan> out;
    for (const HaloPiece& x : pieces_)
      if (!has_halo(x))
        for (int64_t h = 0; h < H_; ++h) out.push_back(RowSpan{(x.b * H_ + h) * n_ + x.begin, x.len, 0});
    return out;
  }
  SoftmaxAttentionParams params(const RowSpans& spans) const {
    return softmax_pieces_params(attention_softmax_params(cfg_, 1, spans.longest()), spans);
  }

  // [H, rows, width] for piece x: zeros, then its own rows of `full` ([B H, n, width]) in the middle.
  Tensor block(const HaloPiece& x, const float* full, int64_t width, const char* tag) const {
    Tensor t = Tensor::empty({H_, x.rows(), width}, DType::f32, *ctx_.tracker, tag);
    fill_zero(ctx_.stream, t.raw(), ctx_.device, t.nbytes());
    if (full) copy_middle(x, t.data<float>(), full, width, true);
    return t;
  }
  // Keys or values of piece x with the halo rows (which = 0: k, 1: v).
  Tensor keys(const HaloPiece& x, const float* full, int which, const char* tag) const {
    Tensor t = block(x, full, D_, tag);
    float* p = t.data<float>();
    const int64_t L = x.rows(), hD = h_ * D_;
    if (x.before > 0)
      copy_rows(ctx_.stream, p, L * D_ * 4, halo_rows(recv_before_, which, x.b) + (h_ - x.before) * D_, hD * 4,
                x.before * D_ * 4, H_, ctx_.device);
    if (x.after > 0)
      copy_rows(ctx_.stream, p + (x.before + x.len) * D_, L * D_ * 4, halo_rows(recv_after_, which, x.b), hD * 4,
                x.after * D_ * 4, H_, ctx_.device);
    return t;
  }
  // The middle rows of a block to or from `full`.
  void copy_middle(const HaloPiece& x, float* block, const float* full, int64_t width, bool into_block) const {
    float* b = block + x.before * width;
    float* f = const_cast<float*>(full) + (x.b * H_ * n_ + x.begin) * width;
    const int64_t L = x.rows();
    if (into_block)
      copy_rows(ctx_.stream, b, L * width * 4, f, n_ * width * 4, x.len * width * 4, H_, ctx_.device);
    else
      copy_rows(ctx_.stream, f, n_ * width * 4, b, L * width * 4, x.len * width * 4, H_, ctx_.device);
  }

  // Backward: the halo rows' key and value gradients of piece x (dk, dv
  // blocks) into the buffers that go back to their owners.
  void keep_halo_grads(const HaloPiece& x, const float* dk, const float* dv) {
    grad_buffers();
    const int64_t L = x.rows(), hD = h_ * D_;
    for (int which = 0; which < 2; ++which) {
      const float* g = which == 0 ? dk : dv;
      if (x.before > 0)
        copy_rows(ctx_.stream, halo_rows(grad_prev_, which, x.b) + (h_ - x.before) * D_, hD * 4, g, L * D_ * 4,
                  x.before * D_ * 4, H_, ctx_.device);
      if (x.after > 0)
        copy_rows(ctx_.stream, halo_rows(grad_next_, which, x.b), hD * 4, g + (x.before + x.len) * D_, L * D_ * 4,
                  x.after * D_ * 4, H_, ctx_.device);
    }
  }
  // Sends the halo gradients to their owners and adds what the neighbours
  // sent to dk, dv: the next rank's to the last h rows, the previous
  // rank's to the first h rows.
  void return_halo_grads(float* dk, float* dv, AttentionTiming& t) {
    if (h_ == 0) return;
    grad_buffers();
    const Tensor from_next = halo("attention.halo_grad_in");
    const Tensor from_prev = causal_ ? Tensor() : halo("attention.halo_grad_in");
    // The gradients go the other way round from the rows: to prev what came from prev.
    send_both(grad_prev_, from_next, grad_next_, from_prev, t, true);
    if (next_ >= 0) add_rows(from_next, n_ - h_, dk, dv);
    if (!causal_ && prev_ >= 0) add_rows(from_prev, 0, dk, dv);
  }

 private:
  // The zeroed halo gradients that go back to the previous (and next) rank.
  void grad_buffers() {
    if (grad_prev_.defined()) return;
    grad_prev_ = halo("attention.halo_grad");
    fill_zero(ctx_.stream, grad_prev_.raw(), ctx_.device, grad_prev_.nbytes());
    if (causal_) return;
    grad_next_ = halo("attention.halo_grad");
    fill_zero(ctx_.stream, grad_next_.raw(), ctx_.device, grad_next_.nbytes());
  }
  // A halo buffer: [B] counts, then [2][B H, h, D] rows of k and v.
  Tensor halo(const char* tag) const {
    return Tensor::empty({B_ + 2 * B_ * H_ * h_ * D_}, DType::f32, *ctx_.tracker, tag);
  }
  float* halo_rows(const Tensor& t, int which, int64_t b) const {
    return const_cast<float*>(t.data<float>()) + B_ + (which * B_ * H_ + b * H_) * h_ * D_;
  }
  // The rows [first, first + h) of every head of k and v, and the counts.
  Tensor halo_of(const float* k, const float* v, int64_t first, const std::vector<float>& count,
                 const char* tag) const {
    Tensor t = halo(tag);
    copy_bytes(ctx_.stream, t.raw(), ctx_.device, count.data(), Device::cpu(), B_ * 4);
    for (int which = 0; which < 2 && h_ > 0; ++which)
      copy_rows(ctx_.stream, halo_rows(t, which, 0), h_ * D_ * 4, (which == 0 ? k : v) + first * D_, n_ * D_ * 4,
                h_ * D_ * 4, B_ * H_, ctx_.device);
    // The host counts must outlive their copy on a CPU stream.
    if (ctx_.device.is_cpu()) synchronize(ctx_.stream);
    return t;
  }
  // Forward (grads = false): to_next goes to the next rank, from_prev comes
  // from the previous one; to_prev and from_next likewise (bidirectional).
  // Gradients (grads = true) travel the other way: first pair to prev from
  // next, second pair to next from prev.
  void send_both(const Tensor& a, const Tensor& a_in, const Tensor& b, const Tensor& b_in, AttentionTiming& t,
                 bool grads = false) {
    const int64_t count = B_ + 2 * B_ * H_ * h_ * D_;
    const int a_to = grads ? prev_ : next_, a_from = grads ? next_ : prev_;
    CommPhase phase(ctx_, sp_);
    send_recv(sp_, a.raw(), a_to, a_in.raw(), a_from, count, DType::f32);
    if (b.defined()) send_recv(sp_, b.raw(), a_from, b_in.raw(), a_to, count, DType::f32);
    phase.issued();
    phase.join();
    phase.add_times(t);
  }
  // The counts of a received halo (zeros where no rank sent one).
  std::vector<float> counts(const Tensor& t, int from) const {
    std::vector<float> c(static_cast<size_t>(B_), 0.f);
    if (from < 0 || !t.defined()) return c;
    synchronize(ctx_.stream);
    copy_bytes_blocking(c.data(), Device::cpu(), t.raw(), ctx_.device, B_ * 4);
    return c;
  }
  // dk, dv rows [first, first + h) of every head += the halo's rows.
  void add_rows(const Tensor& in, int64_t first, float* dk, float* dv) const {
    Tensor rows = Tensor::empty({B_ * H_, h_, D_}, DType::f32, *ctx_.tracker, "attention.halo_rows");
    for (int which = 0; which < 2; ++which) {
      float* g = (which == 0 ? dk : dv) + first * D_;
      copy_rows(ctx_.stream, rows.raw(), h_ * D_ * 4, g, n_ * D_ * 4, h_ * D_ * 4, B_ * H_, ctx_.device);
      residual_add(ctx_, rows.data<float>(), halo_rows(in, which, 0), rows.data<float>(), rows.numel());
      copy_rows(ctx_.stream, g, n_ * D_ * 4, rows.raw(), h_ * D_ * 4, h_ * D_ * 4, B_ * H_, ctx_.device);
    }
  }

  const ModelConfig& cfg_;
  Communicator& sp_;
  const ExecContext& ctx_;
  int64_t H_, B_, n_, D_, h_;
  bool causal_;
  int prev_, next_;
  std::vector<HaloPiece> pieces_;
  Tensor recv_before_, recv_after_, grad_prev_, grad_next_;
};

}  // namespace

void window_attention_forward(const ModelConfig& cfg, Communicator& sp, const ExecContext& ctx, int64_t heads,
                              int64_t n, const PackedLayout& layout, const float* q, const float* k, const float* v,
                              AttentionSaved& saved, AttentionTiming* timing) {
  AttentionTiming t;
  const double t0 = seconds_now();
  WindowPass pass(cfg, sp, ctx, heads, n, layout);
  pass.exchange(k, v, t);
  const int64_t D = pass.D();
  saved.o = Tensor::empty({heads, n, D}, DType::f32, *ctx.tracker, "attention.o");
  saved.lse = Tensor::empty({heads, n}, DType::f32, *ctx.tracker, "attention.lse");
  float *o = saved.o.data<float>(), *lse = saved.lse.data<float>();
  const RowSpans local(ctx, pass.local_spans());
  if (local.count() > 0) softmax_attention_forward(ctx, pass.params(local), q, k, v, o, lse);
  for (const HaloPiece& x : pass.pieces()) {
    if (!WindowPass::has_halo(x)) continue;
    const Tensor qe = pass.block(x, q, D, "attention.window_q"), ke = pass.keys(x, k, 0, "attention.window_k"),
                 ve = pass.keys(x, v, 1, "attention.window_v");
    const Tensor oe = pass.block(x, nullptr, D, "attention.window_o"),
                 le = pass.block(x, nullptr, 1, "attention.window_lse");
    softmax_attention_forward(ctx, pass.params(x), qe.data<float>(), ke.data<float>(), ve.data<float>(),
                              oe.data<float>(), le.data<float>());
    pass.copy_middle(x, oe.data<float>(), o, D, false);
    pass.copy_middle(x, le.data<float>(), lse, 1, false);
  }
  end_attention_timing(ctx, t, t0, timing);
}

void window_attention_backward(const ModelConfig& cfg, Communicator& sp, const ExecContext& ctx, int64_t heads,
                               int64_t n, const PackedLayout& layout, const float* q, const float* k, const float* v,
                               const AttentionSaved& saved, const float* d_o, float* dq, float* dk, float* dv,
                               AttentionTiming* timing) {
  AttentionTiming t;
  const double t0 = seconds_now();
  WindowPass pass(cfg, sp, ctx, heads, n, layout);
  pass.exchange(k, v, t);
  const int64_t D = pass.D();
  const float *o = saved.o.data<float>(), *lse = saved.lse.data<float>();
  const RowSpans local(ctx, pass.local_spans());
  if (local.count() > 0) softmax_attention_backward(ctx, pass.params(local), q, k, v, o, lse, d_o, dq, dk, dv);
  for (const HaloPiece& x : pass.pieces()) {
    if (!WindowPass::has_halo(x)) continue;
    // The halo rows' queries, outputs, log-sum-exps and output gradients are
    // zero: they add nothing to any gradient.
    const Tensor qe = pass.block(x, q, D, "attention.window_q"), ke = pass.keys(x, k, 0, "attention.window_k"),
                 ve = pass.keys(x, v, 1, "attention.window_v"), oe = pass.block(x, o, D, "attention.window_o"),
                 le = pass.block(x, lse, 1, "attention.window_lse"),
                 doe = pass.block(x, d_o, D, "attention.window_grad_o");
    const Tensor dqe = pass.block(x, nullptr, D, "attention.window_dq"),
                 dke = pass.block(x, nullptr, D, "attention.window_dk"),
                 dve = pass.block(x, nullptr, D, "attention.window_dv");
    softmax_attention_backward(ctx, pass.params(x), qe.data<float>(), ke.data<float>(), ve.data<float>(),
                               oe.data<float>(), le.data<float>(), doe.data<float>(), dqe.data<float>(),
                               dke.data<float>(), dve.data<float>());
    pass.copy_middle(x, dqe.data<float>(), dq, D, false);
    pass.copy_middle(x, dke.data<float>(), dk, D, false);
    pass.copy_middle(x, dve.data<float>(), dv, D, false);
    pass.keep_halo_grads(x, dke.data<float>(), dve.data<float>());
  }
  pass.return_halo_grads(dk, dv, t);
  end_attention_timing(ctx, t, t0, timing);
}

}  // namespace pf
