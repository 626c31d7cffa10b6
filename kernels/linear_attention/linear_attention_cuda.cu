// CUDA linear attention (fp32): the chunked algorithm of linear_attention_cpu.cc
// with every head of a chunk step in one cuBLAS strided-batched GEMM, plus small
// kernels for V' = [V 1], the running max of log-scales, the causal mask with
// its log-scale weights, row rescaling, state rescaling and normalisation.
// The chunk loop runs on the host, one step for all heads at a time.
// Per head: phi [n, m], c_k [n], v [n, d], y [n, d+1], L [n]; states are packed
// [heads][1 + m (d+1)]. Log-scales stay on the device: an empty state (log-scale
// kEmptyLogScale, matrix 0) contributes exact zeros, so no host branch or sync.
// Temporaries come from ctx.tracker. Plain fp32 CUDA: nothing sm_80-specific.
#include <algorithm>
#include <initializer_list>
#include <utility>

#include "kernels/linear_attention/linear_attention_backend.h"
#include "kernels/linear_attention/linear_attention_math.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int kThreads = 256;

// Device temporaries recorded in ctx.tracker, released (in the tracker's
// stream order) when the returned tensor goes away: one fp32 allocation split
// into parts of the given float counts, each part starting on a 256-byte
// boundary; *part receives the start of each.
Tensor scratch_parts(const ExecContext& ctx, std::initializer_list<std::pair<float**, int64_t>> parts) {
  PF_REQUIRE(ValueError, ctx.tracker != nullptr, "linear attention on " << ctx.device.str() << " needs ctx.tracker");
  int64_t total = 0;
  for (const auto& part : parts) total += ceil_div(std::max<int64_t>(part.second, 1), 64) * 64;
  Tensor scratch = Tensor::empty({total}, DType::f32, *ctx.tracker, "linear_attention");
  float* next = scratch.data<float>();
  for (const auto& part : parts) {
    *part.first = next;
    next += ceil_div(std::max<int64_t>(part.second, 1), 64) * 64;
  }
  return scratch;
}

// Row-major strided-batched C = op(A) op(B) + beta C over `batch` heads.
void bmm(const ExecContext& ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
         int64_t sa, const float* B, int64_t ldb, int64_t sb, float beta, float* C, int64_t ldc, int64_t sc,
         int64_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  const float one = 1.f;
  PF_CUBLAS_CHECK(cublasSgemmStridedBatched(
      static_cast<cublasHandle_t>(ctx.blas), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one, B, static_cast<int>(ldb), sb, A,
      static_cast<int>(lda), sa, &beta, C, static_cast<int>(ldc), sc, static_cast<int>(batch)));
}

__global__ void k_fill(float* x, int64_t count, float value) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < count) x[i] = value;
}

// vp[h][i, :] = [v[h][i, :], 1] for rows i of a block.
__global__ void k_load_vprime(const float* v, int64_t v_hs, int64_t rows, int64_t d, float* vp, int64_t vp_hs,
                              int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, D1 = d + 1;
  if (idx >= heads * rows * D1) return;
  const int64_t h = idx / (rows * D1), i = (idx / D1) % rows, k = idx % D1;
  vp[h * vp_hs + i * D1 + k] = k < d ? v[h * v_hs + i * d + k] : 1.f;
}

// g[h][i, :] = G_i from o, den, d_o (rows of a block).
__global__ void k_gradient_rows(const float* o, const float* den, const float* d_o, int64_t n, int64_t rows, int64_t d,
                                float* g, int64_t g_hs, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= heads * rows) return;
  const int64_t h = idx / rows, i = idx % rows, r = h * n + i;
  gradient_row(d, o + r * d, den[r], d_o + r * d, g + h * g_hs + i * (d + 1));
}

// out[h][i, k] = exp(head_sign * head_log[h] + row_sign * row_log[h][i]) * in[h][i, k]
__global__ void k_scale_rows(const float* in, int64_t in_hs, int64_t in_ld, float* out, int64_t out_hs, int64_t out_ld,
                             int64_t rows, int64_t cols, const float* head_log, int64_t head_log_stride,
                             float head_sign, const float* row_log, int64_t row_hs, float row_sign, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= heads * rows * cols) return;
  const int64_t h = idx / (rows * cols), i = (idx / cols) % rows, k = idx % cols;
  const float w = expf(head_sign * head_log[h * head_log_stride] + row_sign * row_log[h * row_hs + i]);
  out[h * out_hs + i * out_ld + k] = w * in[h * in_hs + i * in_ld + k];
}

// L[h][i] = max(a[h], c[h][0..i]) over the rows of a chunk (one thread per head).
__global__ void k_running_max(const float* a, const float* c, int64_t c_hs, int64_t rows, float* L, int64_t heads) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= heads) return;
  float run = a[h];
  for (int64_t i = 0; i < rows; ++i) {
    run = max_log_scale(run, c[h * c_hs + i]);
    L[h * c_hs + i] = run;
  }
}

// top[h] = max(a[h], max_i sign * x[h][i]) (one thread per head).
__global__ void k_state_top(const float* a, const float* x, int64_t x_hs, float sign, int64_t rows, float* top,
                            int64_t heads) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= heads) return;
  float t = a[h];
  for (int64_t i = 0; i < rows; ++i) t = max_log_scale(t, sign * x[h * x_hs + i]);
  top[h] = t;
}

// S[h] *= exp(a[h] - top[h])
__global__ void k_rescale_state(float* S, int64_t count, const float* a, const float* top, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= heads * count) return;
  const int64_t h = idx / count;
  S[idx] *= log_scale_weight(a[h], top[h]);
}

// A[h][i, j] <- [j <= i] A exp(c_j - L_i)   (rows x rows)
__global__ void k_causal_mask(float* A, int64_t A_hs, int64_t rows, const float* c, const float* L, int64_t c_hs,
                              int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= heads * rows * rows) return;
  const int64_t h = idx / (rows * rows), i = (idx / rows) % rows, j = idx % rows;
  float* x = A + h * A_hs + i * rows + j;
  *x = j <= i ? *x * log_scale_weight(c[h * c_hs + j], L[h * c_hs + i]) : 0.f;
}

// Forward prefix, per row: top = max(L, b); y *= exp(L - top); L = top.
__global__ void k_prefix_rows(float* y, float* L, int64_t n, int64_t rows, int64_t D1, const float* prefix,
                              int64_t state_size, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= heads * rows) return;
  const int64_t h = idx / rows, r = h * n + idx % rows;
  const float b = prefix[h * state_size], top = max_log_scale(L[r], b), w = log_scale_weight(L[r], top);
  for (int64_t k = 0; k < D1; ++k) y[r * D1 + k] *= w;
  L[r] = top;
}

__global__ void k_pack_state(const float* a, const float* S, int64_t count, float* out, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= heads * (count + 1)) return;
  const int64_t h = idx / (count + 1), k = idx % (count + 1);
  out[idx] = k == 0 ? a[h] : S[h * count + k - 1];
}

__global__ void k_state_clear(float* states, int64_t size, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx < heads * size) states[idx] = idx % size == 0 ? kEmptyLogScale : 0.f;
}

// Matrix elements first (k >= 1), the log-scales in a second launch, so out may alias.
__global__ void k_combine(const float* earlier, const float* later, float* out, int64_t size, int64_t heads,
                          bool log_scales) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t per = log_scales ? 1 : size - 1;
  if (idx >= heads * per) return;
  const int64_t h = idx / per, k = log_scales ? 0 : 1 + idx % per;
  state_combine_element(earlier + h * size, later + h * size, out + h * size, k);
}

__global__ void k_segmented_clear(float* states, int64_t g, int64_t heads) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx < heads * g) states[idx] = idx % g == 1 ? kEmptyLogScale : 0.f;
}

// Matrix elements first (k >= 2), the flags and log-scales in a second launch, so out may alias.
__global__ void k_segmented_combine(const float* earlier, const float* later, float* out, int64_t g, int64_t heads,
                                    bool heads_only) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t per = heads_only ? 1 : g - 2;
  if (idx >= heads * per) return;
  const int64_t h = idx / per;
  if (heads_only) segmented_state_head(earlier + h * g, later + h * g, out + h * g);
  else segmented_state_element(earlier + h * g, later + h * g, out + h * g, 2 + idx % per);
}

__global__ void k_normalize(const float* y, float* o, float* den, int64_t rows, int64_t d) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows) return;
  const float* yi = y + i * (d + 1);
  const float inv = 1.0f / guarded_denominator(yi[d]);
  for (int64_t k = 0; k < d; ++k) o[i * d + k] = yi[k] * inv;
  den[i] = yi[d];
}

int64_t row_block(const LinAttnShape& s) { return std::max<int64_t>(s.chunk, 256); }

// The running state of one sweep: log-scales a [heads] and matrices S [heads][m D1].
struct SweepState {
  float* a;
  float* top;
  float* S;
};

// (a, S) (+)= rows x of features with per-row log-scales sign * row_log:
// S = exp(a - top) S + (diag(exp(sign row_log - top)) x)^T rhs,  a = top.
void state_update(const ExecContext& ctx, const LinAttnShape& s, SweepState& st, const float* x, int64_t x_hs,
                  const float* row_log, int64_t row_hs, float sign, const float* rhs, int64_t rhs_hs, int64_t rows,
                  float* scaled) {
  const int64_t H = s.heads, m = s.m, D1 = s.d + 1;
  cudaStream_t cs = cuda_stream(ctx);
  k_state_top<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, row_log, row_hs, sign, rows, st.top, H);
  k_rescale_state<<<grid_size(H * m * D1, kThreads), kThreads, 0, cs>>>(st.S, m * D1, st.a, st.top, H);
  k_scale_rows<<<grid_size(H * rows * m, kThreads), kThreads, 0, cs>>>(x, x_hs, m, scaled, rows * m, m, rows, m, st.top,
                                                                       1, -1.f, row_log, row_hs, sign, H);
  PF_CUDA_CHECK_LAUNCH();
  bmm(ctx, true, false, m, D1, rows, scaled, m, rows * m, rhs, D1, rhs_hs, 1.f, st.S, D1, m * D1, H);
  std::swap(st.a, st.top);
}

}  // namespace

void linear_attention_fill_cuda(const ExecContext& ctx, float* x, int64_t count, float value) {
  k_fill<<<grid_size(count, kThreads), kThreads, 0, cuda_stream(ctx)>>>(x, count, value);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_state_clear_cuda(const ExecContext& ctx, const LinAttnShape& s, float* states) {
  k_state_clear<<<grid_size(s.heads * s.state_size(), kThreads), kThreads, 0, cuda_stream(ctx)>>>(
      states, s.state_size(), s.heads);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_state_combine_cuda(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                         const float* earlier, const float* later, float* out) {
  const int64_t size = 1 + m * (d + 1);
  k_combine<<<grid_size(heads * (size - 1), kThreads), kThreads, 0, cuda_stream(ctx)>>>(earlier, later, out, size,
                                                                                        heads, false);
  k_combine<<<grid_size(heads, kThreads), kThreads, 0, cuda_stream(ctx)>>>(earlier, later, out, size, heads, true);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_segmented_state_clear_cuda(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                                 float* states) {
  const int64_t g = 2 + m * (d + 1);
  k_segmented_clear<<<grid_size(heads * g, kThreads), kThreads, 0, cuda_stream(ctx)>>>(states, g, heads);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_segmented_state_combine_cuda(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                                   const float* earlier, const float* later, float* out) {
  const int64_t g = 2 + m * (d + 1);
  k_segmented_combine<<<grid_size(heads * (g - 2), kThreads), kThreads, 0, cuda_stream(ctx)>>>(earlier, later, out,
                                                                                               g, heads, false);
  k_segmented_combine<<<grid_size(heads, kThreads), kThreads, 0, cuda_stream(ctx)>>>(earlier, later, out, g, heads,
                                                                                     true);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_causal_forward_local_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                const float* phi_k, const float* c_k, const float* v, float* y,
                                                float* row_scale, float* block_total) {
  const int64_t H = s.heads, n = s.n, m = s.m, d = s.d, D1 = d + 1, C = std::min(s.chunk, std::max<int64_t>(n, 1));
  cudaStream_t cs = cuda_stream(ctx);
  SweepState st{};
  float *vp = nullptr, *A = nullptr, *scaled = nullptr;
  const Tensor scratch = scratch_parts(
      ctx, {{&st.a, H}, {&st.top, H}, {&st.S, H * m * D1}, {&vp, H * C * D1}, {&A, H * C * C}, {&scaled, H * C * m}});
  k_fill<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, H, kEmptyLogScale);
  k_fill<<<grid_size(H * m * D1, kThreads), kThreads, 0, cs>>>(st.S, H * m * D1, 0.f);
  for (int64_t t0 = 0; t0 < n; t0 += C) {
    const int64_t rows = std::min(C, n - t0);
    const float *q = phi_q + t0 * m, *k = phi_k + t0 * m, *ct = c_k + t0;
    float *Y = y + t0 * D1, *Lt = row_scale + t0;
    k_load_vprime<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(v + t0 * d, n * d, rows, d, vp, C * D1, H);
    k_running_max<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, ct, n, rows, Lt, H);
    PF_CUDA_CHECK_LAUNCH();
    // inter: Y = diag(exp(a - L_i)) Pq S  (S = 0 while the state is empty)
    bmm(ctx, false, false, rows, D1, m, q, m, n * m, st.S, D1, m * D1, 0.f, Y, D1, n * D1, H);
    k_scale_rows<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(Y, n * D1, D1, Y, n * D1, D1, rows, D1, st.a,
                                                                          1, 1.f, Lt, n, -1.f, H);
    // intra: Y += mask(Pq Pk^T) V'
    bmm(ctx, false, true, rows, rows, m, q, m, n * m, k, m, n * m, 0.f, A, rows, C * C, H);
    k_causal_mask<<<grid_size(H * rows * rows, kThreads), kThreads, 0, cs>>>(A, C * C, rows, ct, Lt, n, H);
    PF_CUDA_CHECK_LAUNCH();
    bmm(ctx, false, false, rows, D1, rows, A, rows, C * C, vp, D1, C * D1, 1.f, Y, D1, n * D1, H);
    state_update(ctx, s, st, k, n * m, ct, n, 1.f, vp, C * D1, rows, scaled);
  }
  k_pack_state<<<grid_size(H * (m * D1 + 1), kThreads), kThreads, 0, cs>>>(st.a, st.S, m * D1, block_total, H);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_add_prefix_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                      const float* prefix, float* y, float* row_scale) {
  const int64_t H = s.heads, n = s.n, m = s.m, D1 = s.d + 1, rb = std::min(row_block(s), n), size = s.state_size();
  cudaStream_t cs = cuda_stream(ctx);
  float* scaled = nullptr;
  const Tensor scratch = scratch_parts(ctx, {{&scaled, H * rb * m}});
  for (int64_t t0 = 0; t0 < n; t0 += rb) {
    const int64_t rows = std::min(rb, n - t0);
    // y_i <- exp(L_i - L'_i) y_i + exp(b - L'_i) phi_q[i] Pre,  L'_i = max(L_i, b)
    k_prefix_rows<<<grid_size(H * rows, kThreads), kThreads, 0, cs>>>(y + t0 * D1, row_scale + t0, n, rows, D1, prefix,
                                                                      size, H);
    k_scale_rows<<<grid_size(H * rows * m, kThreads), kThreads, 0, cs>>>(
        phi_q + t0 * m, n * m, m, scaled, rows * m, m, rows, m, prefix, size, 1.f, row_scale + t0, n, -1.f, H);
    PF_CUDA_CHECK_LAUNCH();
    bmm(ctx, false, false, rows, D1, m, scaled, m, rows * m, prefix + 1, D1, size, 1.f, y + t0 * D1, D1, n * D1, H);
  }
}

void linear_attention_normalize_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* y, float* o,
                                     float* den) {
  k_normalize<<<grid_size(s.heads * s.n, kThreads), kThreads, 0, cuda_stream(ctx)>>>(y, o, den, s.heads * s.n, s.d);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_causal_backward_local_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                 const float* phi_k, const float* c_k, const float* v, const float* o,
                                                 const float* den, const float* row_scale, const float* d_o,
                                                 float* d_phi_q, float* d_phi_k, float* d_v, float* block_total_grad) {
  const int64_t H = s.heads, n = s.n, m = s.m, d = s.d, D1 = d + 1, C = std::min(s.chunk, std::max<int64_t>(n, 1));
  const int64_t chunks = ceil_div(n, C);
  cudaStream_t cs = cuda_stream(ctx);
  SweepState st{};
  float *vp = nullptr, *g = nullptr, *A = nullptr, *scaled = nullptr;
  float* Bs = nullptr;  // [heads][chunks][C x C]
  const Tensor scratch = scratch_parts(ctx, {{&st.a, H},
                                             {&st.top, H},
                                             {&st.S, H * m * D1},
                                             {&vp, H * C * D1},
                                             {&g, H * C * D1},
                                             {&A, H * C * C},
                                             {&scaled, H * C * m},
                                             {&Bs, H * chunks * C * C}});
  auto load_rows = [&](int64_t t0, int64_t rows) {
    k_load_vprime<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(v + t0 * d, n * d, rows, d, vp, C * D1, H);
    k_gradient_rows<<<grid_size(H * rows, kThreads), kThreads, 0, cs>>>(o + t0 * d, den + t0, d_o + t0 * d, n, rows, d,
                                                                        g, C * D1, H);
    PF_CUDA_CHECK_LAUNCH();
  };
  // Sweep 1: d_phi_q = diag(exp(a - L_i)) G S^T + B Pk, B = mask(G V'^T) kept per chunk.
  k_fill<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, H, kEmptyLogScale);
  k_fill<<<grid_size(H * m * D1, kThreads), kThreads, 0, cs>>>(st.S, H * m * D1, 0.f);
  for (int64_t t = 0; t < chunks; ++t) {
    const int64_t t0 = t * C, rows = std::min(C, n - t0);
    const float *k = phi_k + t0 * m, *ct = c_k + t0, *Lt = row_scale + t0;
    float *dQ = d_phi_q + t0 * m, *B = Bs + t * C * C;
    load_rows(t0, rows);
    bmm(ctx, false, true, rows, m, D1, g, D1, C * D1, st.S, D1, m * D1, 0.f, dQ, m, n * m, H);
    k_scale_rows<<<grid_size(H * rows * m, kThreads), kThreads, 0, cs>>>(dQ, n * m, m, dQ, n * m, m, rows, m, st.a, 1,
                                                                         1.f, Lt, n, -1.f, H);
    bmm(ctx, false, true, rows, rows, D1, g, D1, C * D1, vp, D1, C * D1, 0.f, B, rows, chunks * C * C, H);
    k_causal_mask<<<grid_size(H * rows * rows, kThreads), kThreads, 0, cs>>>(B, chunks * C * C, rows, ct, Lt, n, H);
    PF_CUDA_CHECK_LAUNCH();
    bmm(ctx, false, false, rows, m, rows, B, rows, chunks * C * C, k, m, n * m, 1.f, dQ, m, n * m, H);
    state_update(ctx, s, st, k, n * m, ct, n, 1.f, vp, C * D1, rows, scaled);
  }
  // Sweep 2 (reverse): d_phi_k, d_v and the gradient state (rho, R) in st.
  k_fill<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, H, kEmptyLogScale);
  k_fill<<<grid_size(H * m * D1, kThreads), kThreads, 0, cs>>>(st.S, H * m * D1, 0.f);
  for (int64_t t = chunks - 1; t >= 0; --t) {
    const int64_t t0 = t * C, rows = std::min(C, n - t0);
    const float *q = phi_q + t0 * m, *k = phi_k + t0 * m, *ct = c_k + t0, *Lt = row_scale + t0, *B = Bs + t * C * C;
    float *dK = d_phi_k + t0 * m, *dV = d_v + t0 * d;
    load_rows(t0, rows);
    bmm(ctx, false, true, rows, m, D1, vp, D1, C * D1, st.S, D1, m * D1, 0.f, dK, m, n * m, H);
    bmm(ctx, false, false, rows, d, m, k, m, n * m, st.S, D1, m * D1, 0.f, dV, d, n * d, H);
    k_scale_rows<<<grid_size(H * rows * m, kThreads), kThreads, 0, cs>>>(dK, n * m, m, dK, n * m, m, rows, m, st.a, 1,
                                                                         1.f, ct, n, 1.f, H);
    k_scale_rows<<<grid_size(H * rows * d, kThreads), kThreads, 0, cs>>>(dV, n * d, d, dV, n * d, d, rows, d, st.a, 1,
                                                                         1.f, ct, n, 1.f, H);
    bmm(ctx, false, true, rows, rows, m, q, m, n * m, k, m, n * m, 0.f, A, rows, C * C, H);
    k_causal_mask<<<grid_size(H * rows * rows, kThreads), kThreads, 0, cs>>>(A, C * C, rows, ct, Lt, n, H);
    PF_CUDA_CHECK_LAUNCH();
    bmm(ctx, true, false, rows, m, rows, B, rows, chunks * C * C, q, m, n * m, 1.f, dK, m, n * m, H);
    bmm(ctx, true, false, rows, d, rows, A, rows, C * C, g, D1, C * D1, 1.f, dV, d, n * d, H);
    state_update(ctx, s, st, q, n * m, Lt, n, -1.f, g, C * D1, rows, scaled);
  }
  k_pack_state<<<grid_size(H * (m * D1 + 1), kThreads), kThreads, 0, cs>>>(st.a, st.S, m * D1, block_total_grad, H);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_backward_add_prefix_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* o,
                                               const float* den, const float* row_scale, const float* d_o,
                                               const float* prefix, float* d_phi_q) {
  const int64_t H = s.heads, n = s.n, m = s.m, d = s.d, D1 = d + 1, rb = std::min(row_block(s), n);
  const int64_t size = s.state_size();
  cudaStream_t cs = cuda_stream(ctx);
  float* g = nullptr;
  const Tensor scratch = scratch_parts(ctx, {{&g, H * rb * D1}});
  for (int64_t t0 = 0; t0 < n; t0 += rb) {
    const int64_t rows = std::min(rb, n - t0);
    k_gradient_rows<<<grid_size(H * rows, kThreads), kThreads, 0, cs>>>(o + t0 * d, den + t0, d_o + t0 * d, n, rows, d,
                                                                        g, rb * D1, H);
    // rows of G scaled by exp(b - L_i), then d_phi_q += G_scaled Pre^T
    k_scale_rows<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(
        g, rb * D1, D1, g, rb * D1, D1, rows, D1, prefix, size, 1.f, row_scale + t0, n, -1.f, H);
    PF_CUDA_CHECK_LAUNCH();
    bmm(ctx, false, true, rows, m, D1, g, D1, rb * D1, prefix + 1, D1, size, 1.f, d_phi_q + t0 * m, m, n * m, H);
  }
}

void linear_attention_backward_add_suffix_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                               const float* c_k, const float* v, const float* suffix, float* d_phi_k,
                                               float* d_v) {
  const int64_t H = s.heads, n = s.n, m = s.m, d = s.d, D1 = d + 1, rb = std::min(row_block(s), n);
  const int64_t size = s.state_size();
  cudaStream_t cs = cuda_stream(ctx);
  float *vp = nullptr, *scaled = nullptr;
  const Tensor scratch = scratch_parts(ctx, {{&vp, H * rb * D1}, {&scaled, H * rb * m}});
  for (int64_t t0 = 0; t0 < n; t0 += rb) {
    const int64_t rows = std::min(rb, n - t0);
    k_load_vprime<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(v + t0 * d, n * d, rows, d, vp, rb * D1, H);
    // rows scaled by exp(c_j + rho)
    k_scale_rows<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(vp, rb * D1, D1, vp, rb * D1, D1, rows, D1,
                                                                          suffix, size, 1.f, c_k + t0, n, 1.f, H);
    k_scale_rows<<<grid_size(H * rows * m, kThreads), kThreads, 0, cs>>>(
        phi_k + t0 * m, n * m, m, scaled, rb * m, m, rows, m, suffix, size, 1.f, c_k + t0, n, 1.f, H);
    PF_CUDA_CHECK_LAUNCH();
    bmm(ctx, false, true, rows, m, D1, vp, D1, rb * D1, suffix + 1, D1, size, 1.f, d_phi_k + t0 * m, m, n * m, H);
    bmm(ctx, false, false, rows, d, m, scaled, m, rb * m, suffix + 1, D1, size, 1.f, d_v + t0 * d, d, n * d, H);
  }
}

void linear_attention_key_state_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                     const float* c_k, const float* v, float* total) {
  const int64_t H = s.heads, n = s.n, m = s.m, d = s.d, D1 = d + 1,
                rb = std::min(row_block(s), std::max<int64_t>(n, 1));
  cudaStream_t cs = cuda_stream(ctx);
  SweepState st{};
  float *vp = nullptr, *scaled = nullptr;
  const Tensor scratch =
      scratch_parts(ctx, {{&st.a, H}, {&st.top, H}, {&st.S, H * m * D1}, {&vp, H * rb * D1}, {&scaled, H * rb * m}});
  k_fill<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, H, kEmptyLogScale);
  k_fill<<<grid_size(H * m * D1, kThreads), kThreads, 0, cs>>>(st.S, H * m * D1, 0.f);
  for (int64_t t0 = 0; t0 < n; t0 += rb) {
    const int64_t rows = std::min(rb, n - t0);
    k_load_vprime<<<grid_size(H * rows * D1, kThreads), kThreads, 0, cs>>>(v + t0 * d, n * d, rows, d, vp, rb * D1, H);
    state_update(ctx, s, st, phi_k + t0 * m, n * m, c_k + t0, n, 1.f, vp, rb * D1, rows, scaled);
  }
  k_pack_state<<<grid_size(H * (m * D1 + 1), kThreads), kThreads, 0, cs>>>(st.a, st.S, m * D1, total, H);
  PF_CUDA_CHECK_LAUNCH();
}

void linear_attention_query_state_cuda(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                       const float* o, const float* den, const float* row_scale, const float* d_o,
                                       float* total) {
  const int64_t H = s.heads, n = s.n, m = s.m, d = s.d, D1 = d + 1,
                rb = std::min(row_block(s), std::max<int64_t>(n, 1));
  cudaStream_t cs = cuda_stream(ctx);
  SweepState st{};
  float *g = nullptr, *scaled = nullptr;
  const Tensor scratch =
      scratch_parts(ctx, {{&st.a, H}, {&st.top, H}, {&st.S, H * m * D1}, {&g, H * rb * D1}, {&scaled, H * rb * m}});
  k_fill<<<grid_size(H, kThreads), kThreads, 0, cs>>>(st.a, H, kEmptyLogScale);
  k_fill<<<grid_size(H * m * D1, kThreads), kThreads, 0, cs>>>(st.S, H * m * D1, 0.f);
  for (int64_t t0 = 0; t0 < n; t0 += rb) {
    const int64_t rows = std::min(rb, n - t0);
    k_gradient_rows<<<grid_size(H * rows, kThreads), kThreads, 0, cs>>>(o + t0 * d, den + t0, d_o + t0 * d, n, rows, d,
                                                                        g, rb * D1, H);
    state_update(ctx, s, st, phi_q + t0 * m, n * m, row_scale + t0, n, -1.f, g, rb * D1, rows, scaled);
  }
  k_pack_state<<<grid_size(H * (m * D1 + 1), kThreads), kThreads, 0, cs>>>(st.a, st.S, m * D1, total, H);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
