// CPU exact softmax attention, tiled (flash-attention style), per head of
// [heads, n, d] fp32 row-major; lse [heads, n].
// Forward, per (head, query tile of bq rows), over key tiles of bk rows
// from the tile's first visible key to its last (causal: none right of the
// diagonal; window: none before the first row's window), each row masked to
// its visible span:
//   S = scale Q_t K_t^T (gemm, bq x bk), online softmax (running max m and
//   sum l, rescale O_t), O_t += P V_t (gemm); finally O_t /= l, lse = m + log l.
// Backward, per head (recompute scheme): D_i = dO_i . O_i, then per key tile
// and query tile: P = exp(scale Q_t K_t^T - lse), dV_t += P^T dO_t,
// dP = dO_t V_t^T, dS = scale P (dP - D), dQ_t += dS K_t, dK_t += dS^T Q_t.
// Scratch: bq x bk tiles per thread (+ D [n] per thread in the backward).
// Over pieces (p.pieces) each call head is its piece's rows with the tile
// rows of a call on it alone, read from the pieces' table inside the queued
// work (the table lives in the stream's order).
// Both run on ctx.stream; the tile GEMMs run on the OpenMP threads, so they
// call the host sgemm (gemm_f32_host), not the stream-launching gemm_f32_cpu.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/gemm/gemm.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "runtime/check.h"
#include "runtime/row_spans.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr const char* kScratchTag = "softmax_attention";

// Tile sizes actually used: never larger than the sequence.
int64_t tile_rows(int64_t tile, int64_t n) { return std::max<int64_t>(1, std::min(tile, n)); }

int64_t forward_floats_per_thread(const SoftmaxAttentionParams& p) {
  const int64_t bq = tile_rows(p.q_tile, p.n), bk = tile_rows(p.k_tile, p.n);
  return bq * bk + 2 * bq;  // S/P tile, running max and sum
}

int64_t backward_floats_per_thread(const SoftmaxAttentionParams& p) {
  const int64_t bq = tile_rows(p.q_tile, p.n), bk = tile_rows(p.k_tile, p.n);
  return 2 * bq * bk + p.n;  // P tile, dP/dS tile, D
}

// Host scratch of `floats` floats, recorded in `tracker` when one is given,
// else in `untracked` (a local tracker of the caller's, which outlives it).
Tensor host_scratch(MemoryTracker* tracker, MemoryTracker& untracked, int64_t floats) {
  if (tracker)
    PF_REQUIRE(ValueError, tracker->device().is_cpu(),
               "softmax attention CPU scratch needs a CPU tracker, got " << tracker->device().str());
  return Tensor::empty({floats}, DType::f32, tracker ? *tracker : untracked, kScratchTag);
}

// S [rows, bk] = scale Q K^T for the queries from i0 and the `cols` keys from
// j0 of one head; then row(r, s, c0, c1) for each row s of S, [c0, c1) the
// keys query i0 + r sees, and the row's other entries set to 0.
template <typename Row>
void score_tile(const SoftmaxMask& mask, float scale, const float* Q, const float* K, int64_t n, int64_t d, int64_t i0,
                int64_t rows, int64_t j0, int64_t cols, float* S, int64_t bk, Row&& row) {
  gemm_f32_host(false, true, rows, cols, d, scale, Q + i0 * d, d, K + j0 * d, d, 0.f, S, bk);
  for (int64_t r = 0; r < rows; ++r) {
    float* s = S + r * bk;
    int64_t c0 = 0, c1 = 0;
    mask.tile_span(i0 + r, j0, cols, n, &c0, &c1);
    row(r, s, c0, c1);
    std::fill(s, s + c0, 0.f);
    std::fill(s + c1, s + cols, 0.f);
  }
}

// One query tile of one head: rows [i0, i0+rows) of O and lse.
void forward_tile(const SoftmaxAttentionParams& p, float scale, int64_t bk, const float* Q, const float* K,
                  const float* V, float* O, float* lse, int64_t i0, int64_t rows, float* S, float* m, float* l) {
  const int64_t n = p.n, d = p.d;
  float* Ot = O + i0 * d;
  std::fill(Ot, Ot + rows * d, 0.f);
  std::fill(m, m + rows, -std::numeric_limits<float>::infinity());
  std::fill(l, l + rows, 0.f);
  const SoftmaxMask mask{p.causal, p.window};
  const int64_t kend = mask.end_key(i0 + rows - 1, n);
  for (int64_t j0 = mask.first_key(i0); j0 < kend; j0 += bk) {
    const int64_t cols = std::min(bk, kend - j0);
    score_tile(mask, scale, Q, K, n, d, i0, rows, j0, cols, S, bk, [&](int64_t r, float* s, int64_t c0, int64_t c1) {
      // Separate max, exp and sum loops: each one vectorises.
      float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
      for (int64_t c = c0; c < c1; ++c) mx = s[c] > mx ? s[c] : mx;
      const float m_new = std::max(m[r], mx);
      const float alpha = softmax_rescale(m[r], m_new);
      for (int64_t c = c0; c < c1; ++c) s[c] = softmax_exp(s[c] - m_new);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = c0; c < c1; ++c) sum += s[c];
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      if (alpha != 1.f)
        for (int64_t k = 0; k < d; ++k) Ot[r * d + k] *= alpha;
    });
    gemm_f32_host(false, false, rows, d, cols, 1.f, S, bk, V + j0 * d, d, 1.f, Ot, d);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.f / l[r];
    for (int64_t k = 0; k < d; ++k) Ot[r * d + k] *= inv;
    lse[i0 + r] = softmax_lse(m[r], l[r]);
  }
}

// All gradients of one head. D holds n floats, P and dS bq x bk each.
void backward_head(const SoftmaxAttentionParams& p, float scale, int64_t bq, int64_t bk, const float* Q, const float* K,
                   const float* V, const float* O, const float* lse, const float* dO, float* dQ, float* dK, float* dV,
                   float* P, float* dS, float* D) {
  const int64_t n = p.n, d = p.d;
  std::fill(dQ, dQ + n * d, 0.f);
  std::fill(dK, dK + n * d, 0.f);
  std::fill(dV, dV + n * d, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.f;
    for (int64_t k = 0; k < d; ++k) acc += dO[i * d + k] * O[i * d + k];
    D[i] = acc;
  }
  const SoftmaxMask mask{p.causal, p.window};
  for (int64_t j0 = 0; j0 < n; j0 += bk) {
    const int64_t cols = std::min(bk, n - j0);
    // Only the queries that see a key of this tile (causal: none before j0;
    // window: none more than window - 1 away).
    const int64_t i_end = mask.end_query(j0 + cols - 1, n);
    for (int64_t i0 = mask.first_query(j0); i0 < i_end; i0 += bq) {
      const int64_t rows = std::min(bq, i_end - i0);
      score_tile(mask, scale, Q, K, n, d, i0, rows, j0, cols, P, bk, [&](int64_t r, float* pr, int64_t c0, int64_t c1) {
        const float li = lse[i0 + r];
        for (int64_t c = c0; c < c1; ++c) pr[c] = softmax_exp(pr[c] - li);
      });
      gemm_f32_host(true, false, cols, d, rows, 1.f, P, bk, dO + i0 * d, d, 1.f, dV + j0 * d, d);
      gemm_f32_host(false, true, rows, cols, d, 1.f, dO + i0 * d, d, V + j0 * d, d, 0.f, dS, bk);
      for (int64_t r = 0; r < rows; ++r) {
        const float Di = D[i0 + r];
        for (int64_t c = 0; c < cols; ++c)
          dS[r * bk + c] = softmax_score_grad(P[r * bk + c], dS[r * bk + c], Di, scale);
      }
      gemm_f32_host(false, false, rows, d, cols, 1.f, dS, bk, K + j0 * d, d, 1.f, dQ + i0 * d, d);
      gemm_f32_host(true, false, cols, d, rows, 1.f, dS, bk, Q + i0 * d, d, 1.f, dK + j0 * d, d);
    }
  }
}

// Call head h: its first row in the buffers and the call's parameters for
// it alone (n its rows; heads 1, no pieces). `spans` is the pieces' table
// (null without pieces), read inside the queued work: the table lives in
// the stream's order, the host spans may not.
struct CpuHead {
  int64_t row0;
  SoftmaxAttentionParams p;
};
CpuHead cpu_head(const SoftmaxAttentionParams& p, const int64_t* spans, int64_t h) {
  const RowSpan x = span_of(spans, h, p.n);
  CpuHead c{x.row0, p};
  c.p.n = x.len;
  c.p.pieces = nullptr;
  c.p.heads = 1;
  return c;
}

}  // namespace

int64_t softmax_attention_cpu_forward_workspace_bytes(const SoftmaxAttentionParams& p, int threads) {
  softmax_attention_check(p);
  return 4 * forward_floats_per_thread(p) * std::max(threads, 1);
}

int64_t softmax_attention_cpu_backward_workspace_bytes(const SoftmaxAttentionParams& p, int threads) {
  softmax_attention_check(p);
  return 4 * backward_floats_per_thread(p) * std::max(threads, 1);
}

void softmax_attention_forward_cpu(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                   const float* K, const float* V, float* O, float* lse) {
  const float scale = softmax_attention_scale(p);
  if (p.heads == 0 || p.n == 0) return;
  const int64_t* spans = p.pieces ? p.pieces->table() : nullptr;
  host_launch(ctx, [=] {
    const int64_t n = p.n, d = p.d;
    const int64_t bq = tile_rows(p.q_tile, n), bk = tile_rows(p.k_tile, n);  // the scratch's
    const int64_t ntq = (n + bq - 1) / bq;                                   // of the longest head: no head has more
    const int threads = omp_get_max_threads();
    const int64_t per_thread = forward_floats_per_thread(p);
    MemoryTracker untracked(Device::cpu());  // holds the scratch when the context has no tracker
    const Tensor scratch = host_scratch(ctx.tracker, untracked, per_thread * threads);
    float* base = scratch.data<float>();
#pragma omp parallel num_threads(threads)
    {
      float* S = base + per_thread * omp_get_thread_num();
      float* m = S + bq * bk;
      float* l = m + bq;
      // Heaviest causal tiles (last query rows) first.
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < p.heads * ntq; ++item) {
        // A head's own tile rows (those of a call on it alone).
        const CpuHead c = cpu_head(p, spans, item / ntq);
        const int64_t hq = tile_rows(p.q_tile, c.p.n), hk = tile_rows(p.k_tile, c.p.n);
        const int64_t tiles = (c.p.n + hq - 1) / hq;
        if (item % ntq >= tiles) continue;
        const int64_t t = tiles - 1 - item % ntq;
        const int64_t off = c.row0 * d, i0 = t * hq;
        forward_tile(c.p, scale, hk, Q + off, K + off, V + off, O + off, lse + c.row0, i0, std::min(hq, c.p.n - i0), S,
                     m, l);
      }
    }
  });
}

void softmax_attention_backward_cpu(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                    const float* K, const float* V, const float* O, const float* lse, const float* dO,
                                    float* dQ, float* dK, float* dV) {
  const float scale = softmax_attention_scale(p);
  if (p.heads == 0 || p.n == 0) return;
  const int64_t* spans = p.pieces ? p.pieces->table() : nullptr;
  host_launch(ctx, [=] {
    const int64_t n = p.n, d = p.d;
    const int64_t bq = tile_rows(p.q_tile, n), bk = tile_rows(p.k_tile, n);
    const int threads = omp_get_max_threads();
    const int64_t per_thread = backward_floats_per_thread(p);
    MemoryTracker untracked(Device::cpu());  // holds the scratch when the context has no tracker
    const Tensor scratch = host_scratch(ctx.tracker, untracked, per_thread * threads);
    float* base = scratch.data<float>();
    // One head per thread; a single head runs serially so that the GEMMs thread.
#pragma omp parallel num_threads(threads) if (p.heads > 1)
    {
      float* P = base + per_thread * omp_get_thread_num();
      float* dS = P + bq * bk;
      float* D = dS + bq * bk;
#pragma omp for schedule(dynamic, 1)
      for (int64_t h = 0; h < p.heads; ++h) {
        // A head's own tile rows (those of a call on it alone).
        const CpuHead c = cpu_head(p, spans, h);
        if (c.p.n == 0) continue;
        const int64_t off = c.row0 * d;
        backward_head(c.p, scale, tile_rows(p.q_tile, c.p.n), tile_rows(p.k_tile, c.p.n), Q + off, K + off, V + off,
                      O + off, lse + c.row0, dO + off, dQ + off, dK + off, dV + off, P, dS, D);
      }
    }
  });
}

}  // namespace pf
