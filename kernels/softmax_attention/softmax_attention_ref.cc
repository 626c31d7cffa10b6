// float64 reference of exact softmax attention, per head h of [heads, n, d]:
//   S = scale * Q K^T (n x n, causal: S_ij = -inf for j > i; window w > 0:
//   also for |i - j| >= w), P = softmax_rows(S),
//   O = P V, lse_i = log sum_j exp(S_ij);
// backward from dO: dV = P^T dO, dP = dO V^T, D_i = sum_j P_ij dP_ij (= dO_i . O_i),
//   dS = P (dP - D), dQ = scale dS K, dK = scale dS^T Q;
// decode (one query per head against n keys at kv_stride): o = softmax(scale K q) V.
// Straightforward loops, one row of P at a time, O(n^2 d) time: for tests only.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/softmax_attention/softmax_attention.h"

namespace pf {
namespace {

// The keys query i sees: [lo, hi), written out here rather than taken from
// the kernels' mask, so that the reference checks it.
struct KeyRange {
  int64_t lo, hi;
};
KeyRange visible_keys(const SoftmaxAttentionParams& p, int64_t i) {
  KeyRange r{0, p.causal ? i + 1 : p.n};
  if (p.window > 0) {
    r.lo = std::max<int64_t>(0, i - p.window + 1);
    r.hi = std::min(r.hi, i + p.window);
  }
  return r;
}

// Row i of P (entries [lo, hi) of the returned range; the others are not
// used) and lse_i.
KeyRange reference_row(const SoftmaxAttentionParams& p, double scale, const double* Q, const double* K, int64_t i,
                       std::vector<double>& P, double* lse) {
  const int64_t d = p.d;
  const KeyRange r = visible_keys(p, i);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = r.lo; j < r.hi; ++j) mx = std::max(mx, P[j] = scale * dot_f64_ref(Q + i * d, K + j * d, d));
  double sum = 0;
  for (int64_t j = r.lo; j < r.hi; ++j) sum += (P[j] = std::exp(P[j] - mx));
  for (int64_t j = r.lo; j < r.hi; ++j) P[j] /= sum;
  if (lse) *lse = mx + std::log(sum);
  return r;
}

}  // namespace

void softmax_attention_forward_ref(const SoftmaxAttentionParams& p, const double* Q, const double* K, const double* V,
                                   double* O, double* lse) {
  softmax_attention_check(p);
  const double scale = softmax_attention_scale(p);
  const int64_t n = p.n, d = p.d;
  std::vector<double> P(static_cast<size_t>(n));
  for (int64_t h = 0; h < p.heads; ++h) {
    const int64_t off = h * n * d;
    for (int64_t i = 0; i < n; ++i) {
      const KeyRange r = reference_row(p, scale, Q + off, K + off, i, P, lse + h * n + i);
      double* o = O + off + i * d;
      std::fill(o, o + d, 0.0);
      for (int64_t j = r.lo; j < r.hi; ++j)
        for (int64_t k = 0; k < d; ++k) o[k] += P[j] * V[off + j * d + k];
    }
  }
}

void softmax_attention_backward_ref(const SoftmaxAttentionParams& p, const double* Q, const double* K, const double* V,
                                    const double* dO, double* dQ, double* dK, double* dV) {
  softmax_attention_check(p);
  const double scale = softmax_attention_scale(p);
  const int64_t n = p.n, d = p.d;
  std::vector<double> P(static_cast<size_t>(n)), dS(static_cast<size_t>(n));
  std::fill(dQ, dQ + p.heads * n * d, 0.0);
  std::fill(dK, dK + p.heads * n * d, 0.0);
  std::fill(dV, dV + p.heads * n * d, 0.0);
  for (int64_t h = 0; h < p.heads; ++h) {
    const int64_t off = h * n * d;
    for (int64_t i = 0; i < n; ++i) {
      const KeyRange r = reference_row(p, scale, Q + off, K + off, i, P, nullptr);
      const double* g = dO + off + i * d;
      double D = 0;
      for (int64_t j = r.lo; j < r.hi; ++j) D += P[j] * (dS[j] = dot_f64_ref(g, V + off + j * d, d));
      for (int64_t j = r.lo; j < r.hi; ++j) dS[j] = P[j] * (dS[j] - D);
      for (int64_t j = r.lo; j < r.hi; ++j)
        for (int64_t k = 0; k < d; ++k) {
          dV[off + j * d + k] += P[j] * g[k];
          dQ[off + i * d + k] += scale * dS[j] * K[off + j * d + k];
          dK[off + j * d + k] += scale * dS[j] * Q[off + i * d + k];
        }
    }
  }
}

void softmax_attention_decode_ref(const SoftmaxAttentionParams& p, int64_t kv_stride, const double* q, const double* K,
                                  const double* V, double* o) {
  softmax_attention_decode_check(p, kv_stride);
  const double scale = softmax_attention_scale(p);
  const int64_t n = p.n, d = p.d;
  std::vector<double> P(static_cast<size_t>(n));
  for (int64_t h = 0; h < p.heads; ++h) {
    const double* Kh = K + h * kv_stride;
    const double* Vh = V + h * kv_stride;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, P[j] = scale * dot_f64_ref(q + h * d, Kh + j * d, d));
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (P[j] = std::exp(P[j] - mx));
    double* oh = o + h * d;
    std::fill(oh, oh + d, 0.0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < d; ++k) oh[k] += P[j] / sum * Vh[j * d + k];
  }
}

}  // namespace pf
