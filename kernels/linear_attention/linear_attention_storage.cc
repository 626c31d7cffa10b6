// The storage-typed overloads of linear attention (linear_attention.h): phi_q,
// phi_k [heads, n, m], v, o, d_o [heads, n, d] and the gradients d_phi_q,
// d_phi_k [heads, n, m], d_v [heads, n, d] in f32, f16 or bf16; c_k, y,
// row_scale, den and the states stay fp32. f32 forwards to the fp32 entry
// points on any device. f16/bf16 run on CUDA only: each tensor is staged
// through an fp32 device temporary (widened on entry; outputs rounded back on
// exit), the fp32 kernels do all the math, and ctx.stream is synchronised
// before the temporaries return to ctx.tracker.
#include <algorithm>
#include <vector>

#include "kernels/cast/cast.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/linear_attention/linear_attention_backend.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

// An fp32 temporary of one call, with the output it is rounded back to
// (nullptr for an input).
struct Staged {
  Tensor fp32;
  void* target;
  int64_t count;
};

// Runs `call(in, out)` with fp32 views of storage-typed buffers:
//   in(p, count)               an input of `count` elements (nullptr stays nullptr);
//   out(p, count, accumulate)  an output, rounded back after the call; with
//                              `accumulate` the view starts from the buffer's values.
// With f32 storage the views are the buffers themselves; with f16/bf16 (CUDA)
// they are temporaries, and ctx.stream is synchronised before they are
// released, also when the call throws (kernels may still read them).
template <typename Call>
void run_fp32(const ExecContext& ctx, DType storage, const char* op, Call&& call) {
  PF_REQUIRE(ValueError, storage == DType::f32 || storage == DType::f16 || storage == DType::bf16,
             op << ": storage " << dtype_name(storage) << " is not f32, f16 or bf16");
  PF_REQUIRE(ValueError, storage == DType::f32 || ctx.device.is_cuda(),
             op << " on " << ctx.device.str() << ": storage " << dtype_name(storage)
                << " is supported on CUDA only (the CPU backend stores f32)");
  PF_REQUIRE(ValueError, storage == DType::f32 || ctx.tracker != nullptr,
             op << " on " << ctx.device.str() << ": " << dtype_name(storage) << " storage needs ctx.tracker");
  std::vector<Staged> staged;
  auto temporary = [&](int64_t count, void* target) {
    const int64_t n = std::max<int64_t>(count, 1);
    staged.push_back(
        {Tensor::empty({n}, DType::f32, *ctx.tracker, "linear_attention"), count > 0 ? target : nullptr, n});
    return staged.back().fp32.data<float>();
  };
  auto in = [&](const void* p, int64_t count) -> const float* {
    if (storage == DType::f32 || p == nullptr) return static_cast<const float*>(p);
    float* f = temporary(count, nullptr);
    cast_widen_cuda(ctx, storage, p, f, count);
    return f;
  };
  auto out = [&](void* p, int64_t count, bool accumulate) -> float* {
    if (storage == DType::f32 || p == nullptr) return static_cast<float*>(p);
    float* f = temporary(count, p);
    if (accumulate) cast_widen_cuda(ctx, storage, p, f, count);
    return f;
  };
  try {
    call(in, out);
    if (staged.empty()) return;
    for (const Staged& b : staged)
      if (b.target != nullptr) cast_narrow_cuda(ctx, storage, b.fp32.data<float>(), b.target, b.count);
    synchronize(ctx.stream);
  } catch (...) {
    if (!staged.empty()) {
      try {
        synchronize(ctx.stream);  // kernels may still read the temporaries
      } catch (...) {
        // The original error is already propagating; the memory is released anyway.
      }
    }
    throw;
  }
}

int64_t rows_of(const LinAttnShape& s) { return s.heads > 0 && s.n > 0 ? s.heads * s.n : 0; }

}  // namespace

void causal_linear_attention_forward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                           const void* phi_q, const void* phi_k, const float* c_k, const void* v,
                                           float* y, float* row_scale, float* block_total,
                                           const float* initial_state) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto /*out*/) {
    const int64_t r = rows_of(s);
    causal_linear_attention_forward_local(ctx, s, in(phi_q, r * s.m), in(phi_k, r * s.m), c_k, in(v, r * s.d), y,
                                          row_scale, block_total, initial_state);
  });
}

void linear_attention_add_prefix(const ExecContext& ctx, const LinAttnShape& s, DType storage, const void* phi_q,
                                 const float* prefix, float* y, float* row_scale) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto /*out*/) {
    linear_attention_add_prefix(ctx, s, in(phi_q, rows_of(s) * s.m), prefix, y, row_scale);
  });
}

void linear_attention_normalize(const ExecContext& ctx, const LinAttnShape& s, DType storage, const float* y, void* o,
                                float* den) {
  run_fp32(ctx, storage, __func__,
           [&](auto /*in*/, auto out) { linear_attention_normalize(ctx, s, y, out(o, rows_of(s) * s.d, false), den); });
}

void causal_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                            const void* phi_q, const void* phi_k, const float* c_k, const void* v,
                                            const void* o, const float* den, const float* row_scale, const void* d_o,
                                            void* d_phi_q, void* d_phi_k, void* d_v, float* block_total_grad,
                                            const float* prefix, const float* suffix) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto out) {
    const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
    causal_linear_attention_backward_local(ctx, s, in(phi_q, rm), in(phi_k, rm), c_k, in(v, rd), in(o, rd), den,
                                           row_scale, in(d_o, rd), out(d_phi_q, rm, false), out(d_phi_k, rm, false),
                                           out(d_v, rd, false), block_total_grad, prefix, suffix);
  });
}

void linear_attention_backward_add_prefix(const ExecContext& ctx, const LinAttnShape& s, DType storage, const void* o,
                                          const float* den, const float* row_scale, const void* d_o,
                                          const float* prefix, void* d_phi_q) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto out) {
    const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
    linear_attention_backward_add_prefix(ctx, s, in(o, rd), den, row_scale, in(d_o, rd), prefix,
                                         out(d_phi_q, rm, true));
  });
}

void linear_attention_backward_add_suffix(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                          const void* phi_k, const float* c_k, const void* v, const float* suffix,
                                          void* d_phi_k, void* d_v) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto out) {
    const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
    linear_attention_backward_add_suffix(ctx, s, in(phi_k, rm), c_k, in(v, rd), suffix, out(d_phi_k, rm, true),
                                         out(d_v, rd, true));
  });
}

void bidirectional_linear_attention_local_state(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                const void* phi_k, const float* c_k, const void* v,
                                                float* local_total) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto /*out*/) {
    bidirectional_linear_attention_local_state(ctx, s, in(phi_k, rows_of(s) * s.m), c_k, in(v, rows_of(s) * s.d),
                                               local_total);
  });
}

void bidirectional_linear_attention_forward_finish(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                   const void* phi_q, const float* total, float* y, float* row_scale) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto /*out*/) {
    bidirectional_linear_attention_forward_finish(ctx, s, in(phi_q, rows_of(s) * s.m), total, y, row_scale);
  });
}

void bidirectional_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                   const void* phi_q, const void* o, const float* den,
                                                   const float* row_scale, const void* d_o, const float* total,
                                                   void* d_phi_q, float* local_grad_total) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto out) {
    const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
    bidirectional_linear_attention_backward_local(ctx, s, in(phi_q, rm), in(o, rd), den, row_scale, in(d_o, rd), total,
                                                  out(d_phi_q, rm, false), local_grad_total);
  });
}

void bidirectional_linear_attention_backward_finish(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                    const void* phi_k, const float* c_k, const void* v,
                                                    const float* grad_total, void* d_phi_k, void* d_v) {
  run_fp32(ctx, storage, __func__, [&](auto in, auto out) {
    const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
    bidirectional_linear_attention_backward_finish(ctx, s, in(phi_k, rm), c_k, in(v, rd), grad_total,
                                                   out(d_phi_k, rm, false), out(d_v, rd, false));
  });
}

}  // namespace pf
