// FAVOR+ attention: argument checks and dispatch of the protocol functions
// (fused CPU kernels, or the composition in slabs on CUDA and for slab_rows > 0),
// and the one-rank composite on top of them; see favor_attention.h.
#include "kernels/favor_attention/favor_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/favor_attention/favor_attention_backend.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

void check_favor_ptrs(bool ok, const char* op, const char* what) {
  PF_REQUIRE(ValueError, ok, op << ": null pointer among " << what);
}

bool fused_cpu(const ExecContext& ctx, const FavorShape& s) { return ctx.device.is_cpu() && s.slab_rows == 0; }

#if PF_HAVE_CUDA
// The fused CUDA kernels, where their 16-row tiles fit in shared memory.
bool fused_cuda(const ExecContext& ctx, const FavorShape& s) {
  return ctx.device.is_cuda() && s.slab_rows == 0 && favor_cuda_fits(s, ctx.device);
}
#endif

// The pointer arguments of a protocol step: each is passed whole to a call
// over all heads, or, at span x of call head h of a call over pieces, where
// that span's part of it starts (null stays null).
template <typename T>
struct RowsArg {  // [rows, width]: the span's rows
  T* p;
  int64_t width;
  T* whole() const { return p; }
  T* at(const FavorShape&, const FavorSpan& x, int64_t) const { return p ? p + x.row0 * width : nullptr; }
};
template <typename T>
struct StateArg {  // [heads, state_size]: the call head's state
  T* p;
  T* whole() const { return p; }
  T* at(const FavorShape& s, const FavorSpan&, int64_t h) const { return p ? p + h * s.state_size() : nullptr; }
};
struct ProjectionArg {  // [w_heads, m, d]: the span's head's projection
  const float* W;
  const float* whole() const { return W; }
  const float* at(const FavorShape& s, const FavorSpan& x, int64_t) const { return s.head_w(W, x.head); }
};
struct WeightGradArg {  // [slots, m, d]: the span's head's dW slot
  float* dW;
  float* whole() const { return dW; }
  float* at(const FavorShape& s, const FavorSpan& x, int64_t) const { return dW ? dW + x.head * s.m * s.d : nullptr; }
};
template <typename T>
RowsArg<T> rows(T* p, int64_t width) {
  return RowsArg<T>{p, width};
}
template <typename T>
StateArg<T> state(T* p) {
  return StateArg<T>{p};
}
ProjectionArg projection(const float* W) { return ProjectionArg{W}; }
WeightGradArg weight_grad(float* dW) { return WeightGradArg{dW}; }

// The implementations of one protocol step (favor_attention_backend.h): the
// fused CPU and CUDA kernels (null without CUDA) and the slab composition.
template <typename... P>
using FavorStepFn = void (*)(const ExecContext&, const FavorShape&, P...);
template <typename T>
struct NotDeduced {
  using type = T;
};
template <typename... P>
struct FavorStep {
  FavorStepFn<P...> cpu, cuda, slabs;
};
template <typename... P>
FavorStep<P...> favor_step(FavorStepFn<P...> cpu, typename NotDeduced<FavorStepFn<P...>>::type cuda,
                           FavorStepFn<P...> slabs) {
  return FavorStep<P...>{cpu, cuda, slabs};
}
#if PF_HAVE_CUDA
#define PF_FAVOR_STEP(op) favor_step(&favor_##op##_cpu, &favor_##op##_cuda, &favor_##op##_slabs)
#else
#define PF_FAVOR_STEP(op) favor_step(&favor_##op##_cpu, nullptr, &favor_##op##_slabs)
#endif

// Runs a step on the fused CPU or CUDA kernels or on the slab composition;
// the composition over pieces runs one call per span, a block of one head at
// the span's rows (the fused kernels take the table themselves).
template <typename... P, typename... A>
void run_step(const ExecContext& ctx, const FavorShape& s, const FavorStep<P...>& step, const A&... args) {
  if (fused_cpu(ctx, s)) return step.cpu(ctx, s, args.whole()...);
#if PF_HAVE_CUDA
  if (fused_cuda(ctx, s)) return step.cuda(ctx, s, args.whole()...);
#endif
  if (!s.pieces) return step.slabs(ctx, s, args.whole()...);
  const std::vector<FavorSpan>& spans = s.pieces->spans();
  for (int64_t h = 0; h < s.pieces->count(); ++h) {
    const FavorSpan& x = spans[static_cast<size_t>(h)];
    if (x.len == 0) continue;
    step.slabs(ctx, favor_span_shape(s, x.len), args.at(s, x, h)...);
  }
}

Tensor scratch(MemoryTracker& tracker, int64_t floats) {
  return Tensor::empty({floats}, DType::f32, tracker, kFavorScratchTag);
}

}  // namespace

MemoryTracker& favor_scratch_tracker(const ExecContext& ctx, std::unique_ptr<MemoryTracker>& own) {
  if (ctx.tracker != nullptr) return *ctx.tracker;
  PF_REQUIRE(
      ValueError, ctx.device.is_cpu(),
      kFavorScratchTag << ": an ExecContext on " << ctx.device.str() << " needs a MemoryTracker for temporaries");
  own = std::make_unique<MemoryTracker>(Device::cpu());
  own->set_stream(ctx.stream);
  return *own;
}

FavorShape favor_pieces_shape(FavorShape s, const FavorPieces& pieces) {
  s.pieces = &pieces;
  s.heads = pieces.count();
  s.n = pieces.longest();
  return s;
}

void favor_check(const FavorShape& s, const char* op) {
  PF_REQUIRE(ValueError, s.heads >= 0 && s.n >= 0, op << ": need heads, n >= 0, got heads=" << s.heads << " n=" << s.n);
  PF_REQUIRE(ValueError, s.d >= 1 && s.m >= 1, op << ": need d >= 1 and m >= 1, got d=" << s.d << " m=" << s.m);
  PF_REQUIRE(ValueError, s.chunk >= 1, op << ": chunk must be >= 1, got " << s.chunk);
  PF_REQUIRE(ValueError, s.slab_rows >= 0, op << ": slab_rows must be >= 0, got " << s.slab_rows);
  PF_REQUIRE(ValueError, s.w_heads >= 1, op << ": w_heads must be >= 1, got " << s.w_heads);
  PF_REQUIRE(ValueError, s.feature_slice >= 0 && s.feature_slice % 16 == 0,
             op << ": feature_slice must be 0 or a positive multiple of 16, got " << s.feature_slice);
  check_feature_map_args(op, s.features, s.heads * s.n, s.d, s.m);
  if (s.pieces)
    PF_REQUIRE(ValueError, s.heads == s.pieces->count() && s.n == s.pieces->longest(),
               op << ": a call over " << s.pieces->count() << " pieces (the longest " << s.pieces->longest()
                  << " rows) needs heads=" << s.pieces->count() << " and n=" << s.pieces->longest()
                  << ", got heads=" << s.heads << " n=" << s.n);
}

int64_t favor_workspace_bytes(const FavorShape& s, Device device, int threads) {
  const int64_t f = sizeof(float), ss = s.state_size();
  if (device.is_cpu() && s.slab_rows == 0) return f * std::max(threads, 1) * favor_tile_floats_cpu(s);
  const int64_t w = favor_rows_per_slab(s);
  const int64_t slabs = (s.n + w - 1) / w;
  // Slab buffers, the slab starts of the backward and, inside the kernels,
  // the CPU linear-attention backward's per-thread chunk blocks and the
  // feature-map backward's [slab_rows, m] buffer.
  const int64_t C = std::min(s.chunk, w), D1 = s.d + 1;
  const int64_t kernels =
      std::max<int64_t>(threads, 1) * (s.m * D1 + 2 * C * D1 + C * C + (w + C - 1) / C * C * C + C * s.m) + w * s.m + w;
  const int64_t in_slabs = f * (5 * w * s.m + w + w * s.d + (slabs + 1) * ss + kernels);
#if PF_HAVE_CUDA
  // CUDA with slab_rows = 0 runs the fused kernels, or the slab composition
  // where their tiles do not fit the device's shared memory: the larger of the
  // two, so that a plan made without the device holds on it.
  if (device.is_cuda() && s.slab_rows == 0) return std::max(in_slabs, favor_workspace_bytes_cuda(s));
#endif
  return in_slabs;
}

void favor_key_state(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                     float* total) {
  favor_check(s, __func__);
  check_favor_ptrs(total || s.heads == 0, __func__, "total");
  check_favor_ptrs((k && v && W) || s.heads * s.n == 0, __func__, "k, v and W");
  run_step(ctx, s, PF_FAVOR_STEP(key_state), rows(k, s.d), rows(v, s.d), projection(W), state(total));
}

void favor_causal_forward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                const float* v, const float* W, float* y, float* row_scale, float* block_total) {
  favor_check(s, __func__);
  check_favor_ptrs(block_total || s.heads == 0, __func__, "block_total");
  check_favor_ptrs((q && k && v && W && y && row_scale) || s.heads * s.n == 0, __func__, "q, k, v, W, y and row_scale");
  run_step(ctx, s, PF_FAVOR_STEP(causal_forward_local), rows(q, s.d), rows(k, s.d), rows(v, s.d), projection(W),
           rows(y, s.d + 1), rows(row_scale, 1), state(block_total));
}

void favor_add_prefix(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W, const float* prefix,
                      float* y, float* row_scale) {
  favor_check(s, __func__);
  if (s.heads * s.n == 0) return;
  check_favor_ptrs(q && W && prefix && y && row_scale, __func__, "q, W, prefix, y and row_scale");
  run_step(ctx, s, PF_FAVOR_STEP(add_prefix), rows(q, s.d), projection(W), state(prefix), rows(y, s.d + 1),
           rows(row_scale, 1));
}

void favor_bidirectional_forward_finish(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                        const float* total, float* y, float* row_scale) {
  favor_check(s, __func__);
  if (s.heads * s.n == 0) return;
  check_favor_ptrs(q && W && total && y && row_scale, __func__, "q, W, total, y and row_scale");
  run_step(ctx, s, PF_FAVOR_STEP(bidirectional_forward_finish), rows(q, s.d), projection(W), state(total),
           rows(y, s.d + 1), rows(row_scale, 1));
}

void favor_causal_backward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                 const float* v, const float* W, const float* o, const float* den,
                                 const float* row_scale, const float* d_o, const float* prefix, float* dq, float* dk,
                                 float* dv, float* block_total_grad, float* dW) {
  favor_check(s, __func__);
  check_favor_ptrs(block_total_grad || s.heads == 0, __func__, "block_total_grad");
  check_favor_ptrs((q && k && v && W && o && den && row_scale && d_o && dq && dk && dv) || s.heads * s.n == 0, __func__,
                   "inputs and gradients");
  run_step(ctx, s, PF_FAVOR_STEP(causal_backward_local), rows(q, s.d), rows(k, s.d), rows(v, s.d), projection(W),
           rows(o, s.d), rows(den, 1), rows(row_scale, 1), rows(d_o, s.d), state(prefix), rows(dq, s.d), rows(dk, s.d),
           rows(dv, s.d), state(block_total_grad), weight_grad(dW));
}

void favor_backward_add_suffix(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                               const float* W, const float* suffix, float* dk, float* dv, float* dW) {
  favor_check(s, __func__);
  if (s.heads * s.n == 0) return;
  check_favor_ptrs(k && v && W && suffix && dk && dv, __func__, "k, v, W, suffix, dk and dv");
  run_step(ctx, s, PF_FAVOR_STEP(backward_add_suffix), rows(k, s.d), rows(v, s.d), projection(W), state(suffix),
           rows(dk, s.d), rows(dv, s.d), weight_grad(dW));
}

void favor_bidirectional_backward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                        const float* o, const float* den, const float* row_scale, const float* d_o,
                                        const float* total, float* dq, float* local_grad_total, float* dW) {
  favor_check(s, __func__);
  check_favor_ptrs(local_grad_total || s.heads == 0, __func__, "local_grad_total");
  check_favor_ptrs((q && W && o && den && row_scale && d_o && total && dq) || s.heads * s.n == 0, __func__,
                   "q, W, o, den, row_scale, d_o, total and dq");
  run_step(ctx, s, PF_FAVOR_STEP(bidirectional_backward_local), rows(q, s.d), projection(W), rows(o, s.d), rows(den, 1),
           rows(row_scale, 1), rows(d_o, s.d), state(total), rows(dq, s.d), state(local_grad_total), weight_grad(dW));
}

void favor_bidirectional_backward_finish(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                         const float* W, const float* grad_total, float* dk, float* dv, float* dW) {
  favor_check(s, __func__);
  if (s.heads * s.n == 0) return;
  check_favor_ptrs(k && v && W && grad_total && dk && dv, __func__, "k, v, W, grad_total, dk and dv");
  run_step(ctx, s, PF_FAVOR_STEP(bidirectional_backward_finish), rows(k, s.d), rows(v, s.d), projection(W),
           state(grad_total), rows(dk, s.d), rows(dv, s.d), weight_grad(dW));
}

FavorAttentionParams favor_attention_params(int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t m, bool causal,
                                            FeatureKernel kernel, int64_t chunk) {
  PF_REQUIRE(ValueError, batch >= 0 && heads >= 0,
             "favor_attention: need B, H >= 0, got B=" << batch << " H=" << heads);
  FavorAttentionParams p;
  p.shape.heads = batch * heads;
  p.shape.n = n;
  p.shape.d = d;
  p.shape.m = m;
  p.shape.chunk = chunk;
  p.shape.features = default_feature_params(kernel, d);
  p.causal = causal;
  return p;
}

void favor_attention_check(const FavorAttentionParams& p) {
  PF_REQUIRE(ValueError, p.shape.pieces == nullptr, "favor_attention: the composite runs uniform heads, not pieces");
  favor_check(p.shape, "favor_attention");
}

int64_t favor_attention_total_floats(const FavorAttentionParams& p) {
  return p.causal ? 0 : p.shape.heads * p.shape.state_size();
}

int64_t favor_attention_forward_workspace_bytes(const FavorAttentionParams& p, Device device) {
  const FavorShape& s = p.shape;
  const int64_t floats = p.rows() * (s.d + 1) + s.heads * s.state_size();  // y and the causal block total
  return floats * static_cast<int64_t>(sizeof(float)) + favor_workspace_bytes(s, device, omp_get_max_threads());
}

int64_t favor_attention_backward_workspace_bytes(const FavorAttentionParams& p, Device device) {
  const FavorShape& s = p.shape;
  return s.heads * s.state_size() * static_cast<int64_t>(sizeof(float)) +
         favor_workspace_bytes(s, device, omp_get_max_threads());
}

void favor_attention_forward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                             const float* v, const float* W, float* out, float* den, float* row_scale, float* total) {
  favor_attention_check(p);
  const int64_t r = p.rows(), d = p.shape.d;
  if (r == 0) return;
  check_favor_ptrs(q && k && v && W && out && den && row_scale, __func__, "q, k, v, W, out, den, row_scale");
  check_favor_ptrs(p.causal || total, __func__, "total (bidirectional)");
  const FavorShape& s = p.shape;
  std::unique_ptr<MemoryTracker> own;
  MemoryTracker& tr = favor_scratch_tracker(ctx, own);
  const Tensor y = scratch(tr, r * (d + 1));
  if (p.causal) {
    const Tensor block_total = scratch(tr, s.heads * s.state_size());
    favor_causal_forward_local(ctx, s, q, k, v, W, y.data<float>(), row_scale, block_total.data<float>());
  } else {
    favor_key_state(ctx, s, k, v, W, total);
    favor_bidirectional_forward_finish(ctx, s, q, W, total, y.data<float>(), row_scale);
  }
  linear_attention_normalize(ctx, s.lin(), y.data<float>(), out, den);
}

void favor_attention_backward(const ExecContext& ctx, const FavorAttentionParams& p, const float* q, const float* k,
                              const float* v, const float* W, const float* out, const float* den,
                              const float* row_scale, const float* total, const float* dout, float* dq, float* dk,
                              float* dv, float* dW) {
  favor_attention_check(p);
  if (p.rows() == 0) return;
  check_favor_ptrs(q && k && v && W && out && den && row_scale && dout && dq && dk && dv, __func__,
                   "q, k, v, W, out, den, row_scale, dout, dq, dk, dv");
  check_favor_ptrs(p.causal || total, __func__, "total (bidirectional)");
  const FavorShape& s = p.shape;
  std::unique_ptr<MemoryTracker> own;
  MemoryTracker& tr = favor_scratch_tracker(ctx, own);
  const Tensor grad_total = scratch(tr, s.heads * s.state_size());
  if (p.causal) {
    favor_causal_backward_local(ctx, s, q, k, v, W, out, den, row_scale, dout, nullptr, dq, dk, dv,
                                grad_total.data<float>(), dW);
  } else {
    favor_bidirectional_backward_local(ctx, s, q, W, out, den, row_scale, dout, total, dq, grad_total.data<float>(),
                                       dW);
    favor_bidirectional_backward_finish(ctx, s, k, v, W, grad_total.data<float>(), dk, dv, dW);
  }
}

}  // namespace pf
