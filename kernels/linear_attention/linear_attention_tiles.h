// Host tile routines of the chunked linear-attention kernels (one head, one
// chunk of rows, single-threaded sgemm on the calling thread), shared by the
// CPU linear-attention kernels and the fused FAVOR+ kernels
// (kernels/favor_attention), which feed them features made chunk by chunk.
// Notation as in linear_attention_cpu.cc: S [m, D1] states, V' = [V 1] rows,
// G gradient rows, L row log-scales.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/linear_attention/linear_attention_math.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "runtime/vector_math.h"

namespace pf {
namespace cpu_tiles {

// The host sgemm: this runs inside the stream's work, also on OpenMP threads.
inline void mm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
        float beta, float* C, int64_t ldc) {
  gemm_f32_host(ta, tb, M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc);
}

// Host temporaries recorded in ctx.tracker (when there is one) while a call runs.
class Reservation {
 public:
  Reservation(const ExecContext& ctx, int64_t bytes) : tracker_(ctx.tracker), bytes_(bytes) {
    if (tracker_) tracker_->reserve(bytes_, "linear_attention");
  }
  ~Reservation() {
    if (tracker_) tracker_->release(bytes_, "linear_attention");
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;

 private:
  MemoryTracker* tracker_;
  int64_t bytes_;
};

// Runs f(h) for every head; `workspace` floats per head in flight are recorded.
template <typename F>
inline void for_each_head(const ExecContext& ctx, int64_t heads, int64_t workspace, F&& f) {
  const int threads = omp_get_max_threads();
  const bool parallel = heads >= threads && threads > 1 && !omp_in_parallel();
  Reservation reserved(ctx, (parallel ? threads : 1) * workspace * static_cast<int64_t>(sizeof(float)));
  if (parallel) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t h = 0; h < heads; ++h) f(h);
  } else {
    for (int64_t h = 0; h < heads; ++h) f(h);
  }
}

// Runs f(t0, rows) for each chunk of C rows of n (the last may be shorter),
// in order or from the last: t0 its first row.
template <typename F>
inline void for_each_chunk(int64_t n, int64_t C, bool reverse, F&& f) {
  if (n <= 0) return;
  const int64_t chunks = (n + C - 1) / C;
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t t0 = (reverse ? chunks - 1 - i : i) * C;
    f(t0, std::min(C, n - t0));
  }
}

inline void load_vprime(const float* v, int64_t rows, int64_t d, float* vp) {
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(vp + i * (d + 1), v + i * d, sizeof(float) * d);
    vp[i * (d + 1) + d] = 1.f;
  }
}

inline void load_gradient_rows(const float* o, const float* den, const float* d_o, int64_t rows, int64_t d, float* g) {
  for (int64_t i = 0; i < rows; ++i) gradient_row(d, o + i * d, den[i], d_o + i * d, g + i * (d + 1));
}

// X[i, :] *= w_i for w_i = exp(lhs_i - rhs_i) given per row by `weight(i)`.
template <typename W>
inline void scale_rows(float* x, int64_t rows, int64_t cols, int64_t ld, W&& weight) {
  for (int64_t i = 0; i < rows; ++i) {
    const float w = weight(i);
    for (int64_t k = 0; k < cols; ++k) x[i * ld + k] *= w;
  }
}

// out[i, :] = w_i x[i, :] for dense [rows, cols] x and out, w_i = `weight(i)`.
template <typename W>
inline void scaled_rows(const float* x, int64_t rows, int64_t cols, float* out, W&& weight) {
  for (int64_t i = 0; i < rows; ++i) {
    const float w = weight(i);
    for (int64_t k = 0; k < cols; ++k) out[i * cols + k] = w * x[i * cols + k];
  }
}

inline void zero_rows(float* x, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) std::fill(x + i * ld, x + i * ld + cols, 0.f);
}

// a[i, j] <- [j <= i] a[i, j] exp(c_j - L_i)   (rows x rows). The C^2 / 2
// exponentials per chunk are exp_f32 in a loop that runs 16 or 8 lanes wide.
PF_VECTOR_CLONES inline void causal_mask(float* a, int64_t rows, const float* c, const float* L) {
  for (int64_t i = 0; i < rows; ++i) {
    float* r = a + i * rows;
    const float Li = L[i];
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) r[j] *= exp_f32(c[j] - Li);
    std::fill(r + i + 1, r + rows, 0.f);
  }
}

// (a, S) (+)= rows: S = exp(a - top) S + P^T diag(exp(lg_i - top)) Vals with
// top = max(a, lg_i), P [rows, m], Vals [rows, D1], the row log-scales
// lg_i = `log_scale(i)`. The row weights go into the narrower factor, so
// `scaled` holds rows x min(m, D1).
template <typename LogScale>
inline void state_update(float& a, float* S, int64_t rows, int64_t m, int64_t D1, const float* P, LogScale log_scale,
                         const float* Vals, float* scaled) {
  float top = a;
  for (int64_t i = 0; i < rows; ++i) top = max_log_scale(top, log_scale(i));
  const auto w = [&](int64_t i) { return log_scale_weight(log_scale(i), top); };
  const float beta = log_scale_weight(a, top);
  if (D1 <= m) {
    scaled_rows(Vals, rows, D1, scaled, w);
    mm(true, false, m, D1, rows, P, m, scaled, D1, beta, S, D1);
  } else {
    scaled_rows(P, rows, m, scaled, w);
    mm(true, false, m, D1, rows, scaled, m, Vals, D1, beta, S, D1);
  }
  a = top;
}

// (a, S) (+)= keys rows with log-scales c_j: S [m, D1], Vals = V'.
inline void key_state_update(float& a, float* S, int64_t rows, int64_t m, int64_t D1, const float* pk, const float* c,
                             const float* vp, float* scaled) {
  state_update(a, S, rows, m, D1, pk, [c](int64_t j) { return c[j]; }, vp, scaled);
}

// (rho, R) (+)= query rows with log-scales -L_i: R [m, D1], Vals = G.
inline void query_state_update(float& rho, float* R, int64_t rows, int64_t m, int64_t D1, const float* pq,
                               const float* L, const float* g, float* scaled) {
  state_update(rho, R, rows, m, D1, pq, [L](int64_t i) { return -L[i]; }, g, scaled);
}

inline void store_state(float a, const std::vector<float>& S, float* out) {
  out[0] = a;
  std::memcpy(out + 1, S.data(), sizeof(float) * S.size());
}

}  // namespace cpu_tiles
}  // namespace pf
