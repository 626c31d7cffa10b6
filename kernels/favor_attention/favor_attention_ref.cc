// float64 reference of the FAVOR+ attention composite, one head at a time:
//   phi_q, phi_k [N, m], c_k [N] = feature_map_forward_ref(q or k of the head, W)
//   out [N, D] = linear_attention_forward_ref(causal, phi_q, phi_k, c_k, v)
// and the backward chains the references:
//   d_phi_q, d_phi_k, dv = linear_attention_backward_ref(..., dout)
//   dq = feature_map_backward_ref(q, W, phi_q, d_phi_q), dk likewise.
// q, k, v, out, dout, dq, dk, dv [B*H, N, D]; W [w_heads, m, D] (w_heads = H:
// head h = b H + j uses W_j); dW [B*H, m, D]. O(N^2 (m + D)) per head.
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/linear_attention/linear_attention.h"

namespace pf {

void favor_attention_forward_ref(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                 const double* W, double* out) {
  favor_attention_check(p);
  const FavorShape& s = p.shape;
  const int64_t n = s.n, d = s.d, m = s.m, bh = s.heads;
  std::vector<double> phi_q(n * m), phi_k(n * m), c_q(n), c_k(n);
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = h * n * d;
    const double* Wh = s.head_w(W, h);
    feature_map_forward_ref(s.features, n, d, m, q + off, Wh, phi_q.data(), c_q.data());
    feature_map_forward_ref(s.features, n, d, m, k + off, Wh, phi_k.data(), c_k.data());
    linear_attention_forward_ref(p.causal, n, m, d, phi_q.data(), phi_k.data(), c_k.data(), v + off, out + off);
  }
}

void favor_attention_backward_ref(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                  const double* W, const double* dout, double* dq, double* dk, double* dv, double* dW) {
  favor_attention_check(p);
  const FavorShape& s = p.shape;
  const int64_t n = s.n, d = s.d, m = s.m, bh = s.heads;
  std::vector<double> phi_q(n * m), phi_k(n * m), c_q(n), c_k(n), d_phi_q(n * m), d_phi_k(n * m);
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = h * n * d;
    const double* Wh = s.head_w(W, h);
    double* dWh = dW ? dW + h * m * d : nullptr;
    feature_map_forward_ref(s.features, n, d, m, q + off, Wh, phi_q.data(), c_q.data());
    feature_map_forward_ref(s.features, n, d, m, k + off, Wh, phi_k.data(), c_k.data());
    linear_attention_backward_ref(p.causal, n, m, d, phi_q.data(), phi_k.data(), c_k.data(), v + off, dout + off,
                                  d_phi_q.data(), d_phi_k.data(), dv + off);
    feature_map_backward_ref(s.features, n, d, m, q + off, Wh, phi_q.data(), d_phi_q.data(), dq + off, dWh);
    feature_map_backward_ref(s.features, n, d, m, k + off, Wh, phi_k.data(), d_phi_k.data(), dk + off, dWh);
  }
}

}  // namespace pf
