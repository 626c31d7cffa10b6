// Test driver of the FAVOR+ sequence-parallel protocol (favor_attention.h) on
// one process: the sequence of every head is cut into P blocks, each block
// runs the protocol's local steps as its rank would, and the scans between
// them are done in order with the log-scale combine. As the model does
// (model/attention.cc), with P > 1 every block runs the prefix and suffix
// steps: the first block's prefix and the last block's suffix are the
// scans' empty state. Works on any device: the
// arrays are device pointers of ctx, blocks are gathered and scattered with
// copy_bytes. Writes whole-sequence out, dq, dk, dv [heads, n, d]; when dW is
// not null, every block's backward calls add their projection gradient to it
// ([heads, m, d], as the ranks' partial sums would be added by the allreduce).
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"

namespace pf {
namespace test {

// The protocol's local steps as the dispatcher runs them (favor_attention.h).
struct DispatchedFavorOps {
#define PF_FORWARD_OP(name)                                   \
  template <typename... A>                                    \
  void name(const ExecContext& ctx, A... args) const {        \
    favor_##name(ctx, args...);                               \
  }
  PF_FORWARD_OP(causal_forward_local)
  PF_FORWARD_OP(add_prefix)
  PF_FORWARD_OP(key_state)
  PF_FORWARD_OP(bidirectional_forward_finish)
  PF_FORWARD_OP(causal_backward_local)
  PF_FORWARD_OP(backward_add_suffix)
  PF_FORWARD_OP(bidirectional_backward_local)
  PF_FORWARD_OP(bidirectional_backward_finish)
#undef PF_FORWARD_OP
};

// Ops: an object with the protocol's eight local steps as methods of the same
// arguments as the favor_* functions (DispatchedFavorOps, or another
// implementation under test).
template <class Ops>
inline void run_favor_protocol(const Ops& ops, const ExecContext& ctx, const FavorShape& whole, bool causal, int P,
                               const float* q, const float* k, const float* v, const float* W, const float* d_o,
                               float* out, float* dq, float* dk, float* dv, float* dW = nullptr) {
  MemoryTracker& tr = *ctx.tracker;
  const int64_t H = whole.heads, n = whole.n, d = whole.d, ss = whole.state_size();
  std::vector<int64_t> start(P + 1);
  for (int r = 0; r <= P; ++r) start[r] = n * r / P;
  auto rows_of = [&](int r) { return start[r + 1] - start[r]; };
  auto shape_of = [&](int r) {
    FavorShape s = whole;
    s.n = rows_of(r);
    return s;
  };
  auto tensor = [&](int64_t floats) { return Tensor::empty({std::max<int64_t>(floats, 1)}, DType::f32, tr, "test"); };
  auto move_block = [&](int r, int64_t width, const float* src, float* dst, bool gather) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t whole_off = (h * n + start[r]) * width, block_off = h * rows_of(r) * width;
      const float* from = gather ? src + whole_off : src + block_off;
      float* to = gather ? dst + block_off : dst + whole_off;
      copy_bytes(ctx.stream, to, ctx.device, from, ctx.device, rows_of(r) * width * 4);
    }
  };
  auto F = [](const Tensor& t) { return t.data<float>(); };
  struct Block {
    Tensor q, k, v, g, y, rs, o, den, dq, dk, dv, T, U, pre, suf;
  };
  std::vector<Block> b(P);
  for (int r = 0; r < P; ++r) {
    const int64_t x = H * rows_of(r) * d, rr = H * rows_of(r);
    b[r] = Block{tensor(x), tensor(x), tensor(x), tensor(x), tensor(rr * (d + 1)), tensor(rr), tensor(x),
                 tensor(rr), tensor(x), tensor(x), tensor(x), tensor(H * ss), tensor(H * ss), tensor(H * ss),
                 tensor(H * ss)};
    move_block(r, d, q, F(b[r].q), true);
    move_block(r, d, k, F(b[r].k), true);
    move_block(r, d, v, F(b[r].v), true);
    move_block(r, d, d_o, F(b[r].g), true);
  }
  const LinAttnShape states{H, 0, whole.m, d, whole.chunk};
  const Tensor total = tensor(H * ss);
  const bool distributed = P > 1;
  if (causal) {
    for (int r = 0; r < P; ++r)
      ops.causal_forward_local(ctx, shape_of(r), F(b[r].q), F(b[r].k), F(b[r].v), W, F(b[r].y), F(b[r].rs),
                                 F(b[r].T));
    linear_attention_state_clear(ctx, states, F(b[0].pre));
    for (int r = 1; r < P; ++r)
      linear_attention_state_combine(ctx, H, whole.m, d, F(b[r - 1].pre), F(b[r - 1].T), F(b[r].pre));
    for (int r = 0; r < P && distributed; ++r)
      ops.add_prefix(ctx, shape_of(r), F(b[r].q), W, F(b[r].pre), F(b[r].y), F(b[r].rs));
  } else {
    for (int r = 0; r < P; ++r) ops.key_state(ctx, shape_of(r), F(b[r].k), F(b[r].v), W, F(b[r].T));
    linear_attention_state_clear(ctx, states, F(total));
    for (int r = 0; r < P; ++r) linear_attention_state_combine(ctx, H, whole.m, d, F(total), F(b[r].T), F(total));
    for (int r = 0; r < P; ++r)
      ops.bidirectional_forward_finish(ctx, shape_of(r), F(b[r].q), W, F(total), F(b[r].y), F(b[r].rs));
  }
  for (int r = 0; r < P; ++r) {
    LinAttnShape ls = shape_of(r).lin();
    linear_attention_normalize(ctx, ls, F(b[r].y), F(b[r].o), F(b[r].den));
  }
  if (causal) {
    for (int r = 0; r < P; ++r)
      ops.causal_backward_local(ctx, shape_of(r), F(b[r].q), F(b[r].k), F(b[r].v), W, F(b[r].o), F(b[r].den),
                                  F(b[r].rs), F(b[r].g), distributed ? F(b[r].pre) : nullptr, F(b[r].dq), F(b[r].dk),
                                  F(b[r].dv), F(b[r].U), dW);
    linear_attention_state_clear(ctx, states, F(b[P - 1].suf));
    for (int r = P - 2; r >= 0; --r)
      linear_attention_state_combine(ctx, H, whole.m, d, F(b[r + 1].U), F(b[r + 1].suf), F(b[r].suf));
    for (int r = 0; r < P && distributed; ++r)
      ops.backward_add_suffix(ctx, shape_of(r), F(b[r].k), F(b[r].v), W, F(b[r].suf), F(b[r].dk), F(b[r].dv), dW);
  } else {
    const Tensor grad_total = tensor(H * ss);
    for (int r = 0; r < P; ++r)
      ops.bidirectional_backward_local(ctx, shape_of(r), F(b[r].q), W, F(b[r].o), F(b[r].den), F(b[r].rs),
                                         F(b[r].g), F(total), F(b[r].dq), F(b[r].U), dW);
    linear_attention_state_clear(ctx, states, F(grad_total));
    for (int r = 0; r < P; ++r)
      linear_attention_state_combine(ctx, H, whole.m, d, F(grad_total), F(b[r].U), F(grad_total));
    for (int r = 0; r < P; ++r)
      ops.bidirectional_backward_finish(ctx, shape_of(r), F(b[r].k), F(b[r].v), W, F(grad_total), F(b[r].dk),
                                          F(b[r].dv), dW);
  }
  for (int r = 0; r < P; ++r) {
    move_block(r, d, F(b[r].o), out, false);
    move_block(r, d, F(b[r].dq), dq, false);
    move_block(r, d, F(b[r].dk), dk, false);
    move_block(r, d, F(b[r].dv), dv, false);
  }
  synchronize(ctx.stream);
}

inline void run_favor_protocol(const ExecContext& ctx, const FavorShape& whole, bool causal, int P, const float* q,
                               const float* k, const float* v, const float* W, const float* d_o, float* out, float* dq,
                               float* dk, float* dv, float* dW = nullptr) {
  run_favor_protocol(DispatchedFavorOps{}, ctx, whole, causal, P, q, k, v, W, d_o, out, dq, dk, dv, dW);
}

}  // namespace test
}  // namespace pf
