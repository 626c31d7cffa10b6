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
#include "runtime/memory.h"

namespace pf {
namespace {

// fp32 views of storage-typed buffers for one call. With f32 storage the views
// are the buffers themselves; with f16/bf16 (CUDA) they are temporaries.
class Fp32Staging {
 public:
  Fp32Staging(const ExecContext& ctx, DType storage, const char* op) : ctx_(ctx), storage_(storage) {
    PF_REQUIRE(ValueError, storage == DType::f32 || storage == DType::f16 || storage == DType::bf16,
               op << ": storage " << dtype_name(storage) << " is not f32, f16 or bf16");
    PF_REQUIRE(ValueError, storage == DType::f32 || ctx.device.is_cuda(),
               op << " on " << ctx.device.str() << ": storage " << dtype_name(storage)
                  << " is supported on CUDA only (the CPU backend stores f32)");
    PF_REQUIRE(ValueError, storage == DType::f32 || ctx.tracker != nullptr,
               op << " on " << ctx.device.str() << ": " << dtype_name(storage) << " storage needs ctx.tracker");
  }
  Fp32Staging(const Fp32Staging&) = delete;
  Fp32Staging& operator=(const Fp32Staging&) = delete;

  ~Fp32Staging() {
    if (buffers_.empty()) return;
    if (!finished_) {
      try {
        synchronize(ctx_.stream);  // kernels may still read the temporaries
      } catch (...) {
        // The original error is already propagating; the memory is freed anyway.
      }
    }
    for (const Buffer& b : buffers_) device_free(*ctx_.tracker, b.fp32, b.count * 4, "linear_attention");
  }

  // An input of `count` elements (nullptr stays nullptr).
  const float* in(const void* p, int64_t count) {
    if (storage_ == DType::f32 || p == nullptr) return static_cast<const float*>(p);
    float* f = allocate(count, nullptr);
    cast_widen_cuda(ctx_, storage_, p, f, count);
    return f;
  }
  // An output of `count` elements, rounded back by finish(); with `accumulate`
  // the temporary starts from the buffer's current values.
  float* out(void* p, int64_t count, bool accumulate) {
    if (storage_ == DType::f32 || p == nullptr) return static_cast<float*>(p);
    float* f = allocate(count, p);
    if (accumulate) cast_widen_cuda(ctx_, storage_, p, f, count);
    return f;
  }
  // Rounds the outputs back and waits for the stream.
  void finish() {
    if (buffers_.empty()) return;
    for (const Buffer& b : buffers_)
      if (b.target != nullptr) cast_narrow_cuda(ctx_, storage_, b.fp32, b.target, b.count);
    synchronize(ctx_.stream);
    finished_ = true;
  }

 private:
  struct Buffer {
    float* fp32;
    int64_t count;
    void* target;  // output to round back to, nullptr for inputs
  };
  float* allocate(int64_t count, void* target) {
    const int64_t n = std::max<int64_t>(count, 1);
    auto* f = static_cast<float*>(device_allocate(*ctx_.tracker, n * 4, "linear_attention"));
    buffers_.push_back({f, n, count > 0 ? target : nullptr});
    return f;
  }

  const ExecContext& ctx_;
  DType storage_;
  std::vector<Buffer> buffers_;
  bool finished_ = false;
};

int64_t rows_of(const LinAttnShape& s) { return s.heads > 0 && s.n > 0 ? s.heads * s.n : 0; }

}  // namespace

void causal_linear_attention_forward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                           const void* phi_q, const void* phi_k, const float* c_k, const void* v,
                                           float* y, float* row_scale, float* block_total,
                                           const float* initial_state) {
  Fp32Staging st(ctx, storage, __func__);
  const int64_t r = rows_of(s);
  causal_linear_attention_forward_local(ctx, s, st.in(phi_q, r * s.m), st.in(phi_k, r * s.m), c_k, st.in(v, r * s.d),
                                        y, row_scale, block_total, initial_state);
  st.finish();
}

void linear_attention_add_prefix(const ExecContext& ctx, const LinAttnShape& s, DType storage, const void* phi_q,
                                 const float* prefix, float* y, float* row_scale) {
  Fp32Staging st(ctx, storage, __func__);
  linear_attention_add_prefix(ctx, s, st.in(phi_q, rows_of(s) * s.m), prefix, y, row_scale);
  st.finish();
}

void linear_attention_normalize(const ExecContext& ctx, const LinAttnShape& s, DType storage, const float* y, void* o,
                                float* den) {
  Fp32Staging st(ctx, storage, __func__);
  linear_attention_normalize(ctx, s, y, st.out(o, rows_of(s) * s.d, false), den);
  st.finish();
}

void causal_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                            const void* phi_q, const void* phi_k, const float* c_k, const void* v,
                                            const void* o, const float* den, const float* row_scale, const void* d_o,
                                            void* d_phi_q, void* d_phi_k, void* d_v, float* block_total_grad,
                                            const float* prefix, const float* suffix) {
  Fp32Staging st(ctx, storage, __func__);
  const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
  causal_linear_attention_backward_local(ctx, s, st.in(phi_q, rm), st.in(phi_k, rm), c_k, st.in(v, rd), st.in(o, rd),
                                         den, row_scale, st.in(d_o, rd), st.out(d_phi_q, rm, false),
                                         st.out(d_phi_k, rm, false), st.out(d_v, rd, false), block_total_grad, prefix,
                                         suffix);
  st.finish();
}

void linear_attention_backward_add_prefix(const ExecContext& ctx, const LinAttnShape& s, DType storage, const void* o,
                                          const float* den, const float* row_scale, const void* d_o,
                                          const float* prefix, void* d_phi_q) {
  Fp32Staging st(ctx, storage, __func__);
  const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
  linear_attention_backward_add_prefix(ctx, s, st.in(o, rd), den, row_scale, st.in(d_o, rd), prefix,
                                       st.out(d_phi_q, rm, true));
  st.finish();
}

void linear_attention_backward_add_suffix(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                          const void* phi_k, const float* c_k, const void* v, const float* suffix,
                                          void* d_phi_k, void* d_v) {
  Fp32Staging st(ctx, storage, __func__);
  const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
  linear_attention_backward_add_suffix(ctx, s, st.in(phi_k, rm), c_k, st.in(v, rd), suffix, st.out(d_phi_k, rm, true),
                                       st.out(d_v, rd, true));
  st.finish();
}

void bidirectional_linear_attention_local_state(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                const void* phi_k, const float* c_k, const void* v,
                                                float* local_total) {
  Fp32Staging st(ctx, storage, __func__);
  bidirectional_linear_attention_local_state(ctx, s, st.in(phi_k, rows_of(s) * s.m), c_k, st.in(v, rows_of(s) * s.d),
                                             local_total);
  st.finish();
}

void bidirectional_linear_attention_forward_finish(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                   const void* phi_q, const float* total, float* y, float* row_scale) {
  Fp32Staging st(ctx, storage, __func__);
  bidirectional_linear_attention_forward_finish(ctx, s, st.in(phi_q, rows_of(s) * s.m), total, y, row_scale);
  st.finish();
}

void bidirectional_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                   const void* phi_q, const void* o, const float* den,
                                                   const float* row_scale, const void* d_o, const float* total,
                                                   void* d_phi_q, float* local_grad_total) {
  Fp32Staging st(ctx, storage, __func__);
  const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
  bidirectional_linear_attention_backward_local(ctx, s, st.in(phi_q, rm), st.in(o, rd), den, row_scale,
                                                st.in(d_o, rd), total, st.out(d_phi_q, rm, false), local_grad_total);
  st.finish();
}

void bidirectional_linear_attention_backward_finish(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                    const void* phi_k, const float* c_k, const void* v,
                                                    const float* grad_total, void* d_phi_k, void* d_v) {
  Fp32Staging st(ctx, storage, __func__);
  const int64_t rm = rows_of(s) * s.m, rd = rows_of(s) * s.d;
  bidirectional_linear_attention_backward_finish(ctx, s, st.in(phi_k, rm), c_k, st.in(v, rd), grad_total,
                                                 st.out(d_phi_k, rm, false), st.out(d_v, rd, false));
  st.finish();
}

}  // namespace pf
