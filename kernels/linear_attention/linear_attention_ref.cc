// float64 reference of linear attention straight from the definition, one head:
//   w_ij = exp(c_k[j]) phi_q[i].phi_k[j],  o_i = sum_{j in J(i)} w_ij v_j / sum_{j in J(i)} w_ij
// with J(i) = {j <= i} (causal) or all j. phi [n, m], c_k [n], v and o [n, d].
// The backward differentiates sum(d_o * o): with G_i = [dO_i, -(dO_i . o_i)] / den_i
// and V'_j = [v_j 1],  dL/dw_ij = G_i . V'_j, so
//   d_phi_q[i] = sum_j (G_i.V'_j) exp(c_k[j]) phi_k[j],  d_phi_k[j] = sum_i (G_i.V'_j) exp(c_k[j]) phi_q[i],
//   d_v[j] = sum_i w_ij dO_i / den_i.
// O(n^2 (m + d)) time; no log-scale machinery, so it checks the kernels' rescaling.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/linear_attention/linear_attention.h"

namespace pf {
namespace {

// Returns w_ij for j in J(i), 0 outside.
double weight(bool causal, int64_t i, int64_t j, int64_t m, const double* phi_q, const double* phi_k,
              const double* c_k) {
  if (causal && j > i) return 0.0;
  return std::exp(c_k[j]) * dot_f64_ref(phi_q + i * m, phi_k + j * m, m);
}

}  // namespace

void linear_attention_forward_ref(bool causal, int64_t n, int64_t m, int64_t d, const double* phi_q,
                                  const double* phi_k, const double* c_k, const double* v, double* o) {
  std::vector<double> num(d);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(num.begin(), num.end(), 0.0);
    double den = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double w = weight(causal, i, j, m, phi_q, phi_k, c_k);
      if (w == 0.0) continue;
      den += w;
      for (int64_t k = 0; k < d; ++k) num[k] += w * v[j * d + k];
    }
    for (int64_t k = 0; k < d; ++k) o[i * d + k] = num[k] / den;
  }
}

void linear_attention_backward_ref(bool causal, int64_t n, int64_t m, int64_t d, const double* phi_q,
                                   const double* phi_k, const double* c_k, const double* v, const double* d_o,
                                   double* d_phi_q, double* d_phi_k, double* d_v) {
  std::vector<double> o(n * d), den(n, 0.0), g(n * (d + 1));
  linear_attention_forward_ref(causal, n, m, d, phi_q, phi_k, c_k, v, o.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) den[i] += weight(causal, i, j, m, phi_q, phi_k, c_k);
  for (int64_t i = 0; i < n; ++i) {
    double dot_o = 0;
    for (int64_t k = 0; k < d; ++k) {
      g[i * (d + 1) + k] = d_o[i * d + k] / den[i];
      dot_o += d_o[i * d + k] * o[i * d + k];
    }
    g[i * (d + 1) + d] = -dot_o / den[i];
  }
  std::fill(d_phi_q, d_phi_q + n * m, 0.0);
  std::fill(d_phi_k, d_phi_k + n * m, 0.0);
  std::fill(d_v, d_v + n * d, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (causal && j > i) continue;
      const double* gi = g.data() + i * (d + 1);
      const double gv = dot_f64_ref(gi, v + j * d, d) + gi[d];  // G_i . V'_j
      const double e = std::exp(c_k[j]);
      const double w = e * dot_f64_ref(phi_q + i * m, phi_k + j * m, m);
      for (int64_t f = 0; f < m; ++f) {
        d_phi_q[i * m + f] += gv * e * phi_k[j * m + f];
        d_phi_k[j * m + f] += gv * e * phi_q[i * m + f];
      }
      for (int64_t k = 0; k < d; ++k) d_v[j * d + k] += w * gi[k];
    }
  }
}

}  // namespace pf
