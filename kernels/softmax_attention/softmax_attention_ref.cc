// float64 reference of exact softmax attention, per head h of [heads, n, d]:
//   S = scale * Q K^T (n x n, causal: S_ij = -inf for j > i), P = softmax_rows(S),
//   O = P V, lse_i = log sum_j exp(S_ij);
// backward from dO: dV = P^T dO, dP = dO V^T, D_i = sum_j P_ij dP_ij (= dO_i . O_i),
//   dS = P (dP - D), dQ = scale dS K, dK = scale dS^T Q.
// Straightforward and O(n^2) in memory: for tests only.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/softmax_attention/softmax_attention.h"

namespace pf {
namespace {

// P [n, n] = row softmax of scale * Q K^T with the mask; lse [n] when non-null.
void reference_probabilities(const SoftmaxAttentionParams& p, double scale, const double* Q, const double* K,
                             std::vector<double>& P, double* lse) {
  const int64_t n = p.n, d = p.d;
  P.assign(static_cast<size_t>(n * n), 0.0);
  gemm_f64_ref(false, true, n, n, d, scale, Q, d, K, d, 0.0, P.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    double* row = P.data() + i * n;
    const int64_t visible = p.causal ? i + 1 : n;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < visible; ++j) mx = std::max(mx, row[j]);
    double sum = 0;
    for (int64_t j = 0; j < visible; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int64_t j = 0; j < visible; ++j) row[j] /= sum;
    for (int64_t j = visible; j < n; ++j) row[j] = 0;
    if (lse) lse[i] = mx + std::log(sum);
  }
}

}  // namespace

void softmax_attention_forward_ref(const SoftmaxAttentionParams& p, const double* Q, const double* K,
                                   const double* V, double* O, double* lse) {
  softmax_attention_check(p);
  const double scale = softmax_attention_scale(p);
  const int64_t n = p.n, d = p.d;
  std::vector<double> P;
  for (int64_t h = 0; h < p.heads; ++h) {
    const int64_t off = h * n * d;
    reference_probabilities(p, scale, Q + off, K + off, P, lse + h * n);
    gemm_f64_ref(false, false, n, d, n, 1.0, P.data(), n, V + off, d, 0.0, O + off, d);
  }
}

void softmax_attention_backward_ref(const SoftmaxAttentionParams& p, const double* Q, const double* K,
                                    const double* V, const double* dO, double* dQ, double* dK, double* dV) {
  softmax_attention_check(p);
  const double scale = softmax_attention_scale(p);
  const int64_t n = p.n, d = p.d;
  std::vector<double> P, dP(static_cast<size_t>(n * n));
  for (int64_t h = 0; h < p.heads; ++h) {
    const int64_t off = h * n * d;
    reference_probabilities(p, scale, Q + off, K + off, P, nullptr);
    gemm_f64_ref(true, false, n, d, n, 1.0, P.data(), n, dO + off, d, 0.0, dV + off, d);
    gemm_f64_ref(false, true, n, n, d, 1.0, dO + off, d, V + off, d, 0.0, dP.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double D = 0;
      for (int64_t j = 0; j < n; ++j) D += P[i * n + j] * dP[i * n + j];
      for (int64_t j = 0; j < n; ++j) dP[i * n + j] = P[i * n + j] * (dP[i * n + j] - D);
    }
    gemm_f64_ref(false, false, n, d, n, scale, dP.data(), n, K + off, d, 0.0, dQ + off, d);
    gemm_f64_ref(true, false, n, d, n, scale, dP.data(), n, Q + off, d, 0.0, dK + off, d);
  }
}

}  // namespace pf
