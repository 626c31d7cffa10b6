// CPU linear attention (OpenMP + sgemm), chunked, one head per task.
// Per head: phi_q, phi_k [n, m], c_k [n], v [n, d], y [n, d+1], row_scale L [n],
// o [n, d], den [n], states [1 + m (d+1)]; D1 = d + 1, chunk rows C.
//
// Causal forward, chunk t with state (a, S) of all earlier local chunks:
//   L_i   = max(a, max_{j<=i in t} c_j)                          (running max)
//   Y_t   = diag(exp(a - L_i)) Pq S + mask(Pq Pk^T) V'            mask_ij = [j<=i] exp(c_j - L_i)
//   (a,S) = (a',  exp(a - a') S + (diag(exp(c_j - a')) Pk)^T V'),  a' = max(a, max_t c_j)
// Causal backward, with G from gradient_row():
//   sweep 1 (forward order):  dPq_t = diag(exp(a - L_i)) G S^T + B Pk,  B = mask(G V'^T), B kept per chunk
//   sweep 2 (reverse order):  with the gradient state (rho, R) of later chunks
//     dPk_t = diag(exp(c_j + rho)) V' R^T + B^T Pq
//     dV_t  = diag(exp(c_j + rho)) Pk R[:, :d] + A^T G[:, :d],     A = mask(Pq Pk^T)
//     (rho, R) = (rho', exp(rho - rho') R + (diag(exp(-L_i - rho')) Pq)^T G),  rho' = max(rho, max_t -L_i)
// Every exponent is <= 0. Each entry point runs its work on ctx.stream
// (host_launch), as its CUDA twin does. Heads run in parallel (single-threaded
// sgemm inside) when there are at least as many heads as threads, else the
// sgemms are threaded.
// Memory per head in flight: O(C (m + d)) plus B, n*C floats.
#include <algorithm>
#include <vector>

#include "kernels/linear_attention/linear_attention_backend.h"
#include "kernels/linear_attention/linear_attention_tiles.h"

namespace pf {
namespace {

using namespace cpu_tiles;

int64_t row_block(const LinAttnShape& s) { return std::max<int64_t>(s.chunk, 256); }

int64_t chunk_rows(const LinAttnShape& s) { return std::min(s.chunk, std::max<int64_t>(s.n, 1)); }

// Floats per head of forward_head and backward_head below.
int64_t forward_workspace(const LinAttnShape& s) {
  const int64_t C = chunk_rows(s), D1 = s.d + 1;
  return s.m * D1 + C * D1 + C * C + C * s.m;
}
int64_t backward_workspace(const LinAttnShape& s) {
  const int64_t C = chunk_rows(s), D1 = s.d + 1;
  return s.m * D1 + 2 * C * D1 + C * C + (s.n + C - 1) / C * C * C + C * s.m;
}

void forward_head(const LinAttnShape& s, const float* pq, const float* pk, const float* c, const float* v, float* y,
                  float* L, float* total) {
  const int64_t n = s.n, m = s.m, d = s.d, D1 = d + 1, C = chunk_rows(s);
  std::vector<float> S(m * D1, 0.f), vp(C * D1), A(C * C), scaled(C * m);
  float a = kEmptyLogScale;
  for_each_chunk(n, C, false, [&](int64_t t0, int64_t rows) {
    const float *q = pq + t0 * m, *k = pk + t0 * m, *ct = c + t0;
    float *Y = y + t0 * D1, *Lt = L + t0;
    load_vprime(v + t0 * d, rows, d, vp.data());
    float run = a;
    for (int64_t i = 0; i < rows; ++i) Lt[i] = run = max_log_scale(run, ct[i]);
    if (is_empty_log_scale(a)) {
      zero_rows(Y, rows, D1, D1);
    } else {
      mm(false, false, rows, D1, m, q, m, S.data(), D1, 0.f, Y, D1);
      scale_rows(Y, rows, D1, D1, [&](int64_t i) { return log_scale_weight(a, Lt[i]); });
    }
    mm(false, true, rows, rows, m, q, m, k, m, 0.f, A.data(), rows);
    causal_mask(A.data(), rows, ct, Lt);
    mm(false, false, rows, D1, rows, A.data(), rows, vp.data(), D1, 1.f, Y, D1);
    key_state_update(a, S.data(), rows, m, D1, k, ct, vp.data(), scaled.data());
  });
  store_state(a, S, total);
}

void backward_head(const LinAttnShape& s, const float* pq, const float* pk, const float* c, const float* v,
                   const float* o, const float* den, const float* L, const float* d_o, float* dq, float* dk, float* dv,
                   float* total) {
  const int64_t n = s.n, m = s.m, d = s.d, D1 = d + 1, C = chunk_rows(s);
  const int64_t chunks = (n + C - 1) / C;
  std::vector<float> S(m * D1, 0.f), vp(C * D1), g(C * D1), A(C * C), Bs(chunks * C * C), scaled(C * m);
  // Sweep 1: d_phi_q, forward order, keeping B per chunk for sweep 2.
  float a = kEmptyLogScale;
  for_each_chunk(n, C, false, [&](int64_t t0, int64_t rows) {
    const float *k = pk + t0 * m, *ct = c + t0, *Lt = L + t0;
    float *dQ = dq + t0 * m, *B = Bs.data() + t0 * C;  // chunk t0 / C's [C, C] block
    load_vprime(v + t0 * d, rows, d, vp.data());
    load_gradient_rows(o + t0 * d, den + t0, d_o + t0 * d, rows, d, g.data());
    if (is_empty_log_scale(a)) {
      zero_rows(dQ, rows, m, m);
    } else {
      mm(false, true, rows, m, D1, g.data(), D1, S.data(), D1, 0.f, dQ, m);
      scale_rows(dQ, rows, m, m, [&](int64_t i) { return log_scale_weight(a, Lt[i]); });
    }
    mm(false, true, rows, rows, D1, g.data(), D1, vp.data(), D1, 0.f, B, rows);
    causal_mask(B, rows, ct, Lt);
    mm(false, false, rows, m, rows, B, rows, k, m, 1.f, dQ, m);
    key_state_update(a, S.data(), rows, m, D1, k, ct, vp.data(), scaled.data());
  });
  // Sweep 2: d_phi_k, d_v and the gradient state, reverse order. S is reused as R.
  std::vector<float>& R = S;
  std::fill(R.begin(), R.end(), 0.f);
  float rho = kEmptyLogScale;
  for_each_chunk(n, C, true, [&](int64_t t0, int64_t rows) {
    const float *q = pq + t0 * m, *k = pk + t0 * m, *ct = c + t0, *Lt = L + t0,
                *B = Bs.data() + t0 * C;  // chunk t0 / C's [C, C] block
    float *dK = dk + t0 * m, *dV = dv + t0 * d;
    load_vprime(v + t0 * d, rows, d, vp.data());
    load_gradient_rows(o + t0 * d, den + t0, d_o + t0 * d, rows, d, g.data());
    if (is_empty_log_scale(rho)) {
      zero_rows(dK, rows, m, m);
      zero_rows(dV, rows, d, d);
    } else {
      mm(false, true, rows, m, D1, vp.data(), D1, R.data(), D1, 0.f, dK, m);
      mm(false, false, rows, d, m, k, m, R.data(), D1, 0.f, dV, d);
      scale_rows(dK, rows, m, m, [&](int64_t j) { return log_scale_weight(ct[j], -rho); });
      scale_rows(dV, rows, d, d, [&](int64_t j) { return log_scale_weight(ct[j], -rho); });
    }
    mm(false, true, rows, rows, m, q, m, k, m, 0.f, A.data(), rows);
    causal_mask(A.data(), rows, ct, Lt);
    mm(true, false, rows, m, rows, B, rows, q, m, 1.f, dK, m);
    mm(true, false, rows, d, rows, A.data(), rows, g.data(), D1, 1.f, dV, d);
    query_state_update(rho, R.data(), rows, m, D1, q, Lt, g.data(), scaled.data());
  });
  store_state(rho, R, total);
}

// Per head of `size` floats (a log-scale, then the values): r = e (+) l, the
// log-scale combine with its two weights taken once (r may alias e or l).
void combine_state(const float* e, const float* l, float* r, int64_t size) {
  const float top = max_log_scale(e[0], l[0]);
  const float we = log_scale_weight(e[0], top), wl = log_scale_weight(l[0], top);
  for (int64_t k = 1; k < size; ++k) r[k] = we * e[k] + wl * l[k];
  r[0] = top;
}

// Runs f(h) on ctx.stream for each of `heads` states of `size` floats, on
// OpenMP threads when they hold more than 2^16 floats in all.
template <typename F>
void for_each_state(const ExecContext& ctx, int64_t heads, int64_t size, F f) {
  host_launch(ctx, [=] {
#pragma omp parallel for if (heads * size > (1 << 16))
    for (int64_t h = 0; h < heads; ++h) f(h);
  });
}

}  // namespace

void linear_attention_fill_cpu(const ExecContext& ctx, float* x, int64_t count, float value) {
  host_launch(ctx, [=] { std::fill(x, x + count, value); });
}

void linear_attention_state_clear_cpu(const ExecContext& ctx, const LinAttnShape& s, float* states) {
  host_launch(ctx, [=] {
    const int64_t size = s.state_size();
    for (int64_t h = 0; h < s.heads; ++h) {
      states[h * size] = kEmptyLogScale;
      std::fill(states + h * size + 1, states + (h + 1) * size, 0.f);
    }
  });
}

void linear_attention_state_combine_cpu(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                        const float* earlier, const float* later, float* out) {
  const int64_t size = 1 + m * (d + 1);
  for_each_state(ctx, heads, size, [=](int64_t h) {
    // The two weights of state_combine_element, once per head (out may alias an input).
    combine_state(earlier + h * size, later + h * size, out + h * size, size);
  });
}

void linear_attention_segmented_state_clear_cpu(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                                float* states) {
  host_launch(ctx, [=] {
    const int64_t g = 2 + m * (d + 1);
    for (int64_t h = 0; h < heads; ++h) {
      std::fill(states + h * g, states + (h + 1) * g, 0.f);
      states[h * g + 1] = kEmptyLogScale;
    }
  });
}

void linear_attention_segmented_state_combine_cpu(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                                  const float* earlier, const float* later, float* out) {
  const int64_t g = 2 + m * (d + 1);
  for_each_state(ctx, heads, g, [=](int64_t h) {
    const float *e = earlier + h * g, *l = later + h * g;
    float* r = out + h * g;
    if (l[0] != 0.f) {
      if (r != l) std::copy(l + 1, l + g, r + 1);
    } else {
      // The two weights of segmented_state_element, once per head.
      combine_state(e + 1, l + 1, r + 1, g - 1);
    }
    r[0] = (e[0] != 0.f || l[0] != 0.f) ? 1.f : 0.f;
  });
}

void linear_attention_causal_forward_local_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                               const float* phi_k, const float* c_k, const float* v, float* y,
                                               float* row_scale, float* block_total) {
  host_launch(ctx, [=] {
    const int64_t n = s.n, m = s.m, d = s.d;
    for_each_head(ctx, s.heads, forward_workspace(s), [&](int64_t h) {
      forward_head(s, phi_q + h * n * m, phi_k + h * n * m, c_k + h * n, v + h * n * d, y + h * n * (d + 1),
                   row_scale + h * n, block_total + h * s.state_size());
    });
  });
}

void linear_attention_add_prefix_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                     const float* prefix, float* y, float* row_scale) {
  host_launch(ctx, [=] {
    const int64_t n = s.n, m = s.m, D1 = s.d + 1, rb = std::min(row_block(s), n);
    for_each_head(ctx, s.heads, rb * m, [&](int64_t h) {
      const float* pre = prefix + h * s.state_size();
      const float b = pre[0];
      if (is_empty_log_scale(b)) return;
      std::vector<float> scaled(rb * m);
      for_each_chunk(n, rb, false, [&](int64_t t0, int64_t rows) {
        const float* q = phi_q + (h * n + t0) * m;
        float *Y = y + (h * n + t0) * D1, *L = row_scale + h * n + t0;
        // y_i <- exp(L_i - L'_i) y_i + exp(b - L'_i) phi_q[i] Pre,  L'_i = max(L_i, b)
        for (int64_t i = 0; i < rows; ++i) {
          const float top = max_log_scale(L[i], b), wy = log_scale_weight(L[i], top), wp = log_scale_weight(b, top);
          for (int64_t k = 0; k < D1; ++k) Y[i * D1 + k] *= wy;
          for (int64_t f = 0; f < m; ++f) scaled[i * m + f] = wp * q[i * m + f];
          L[i] = top;
        }
        mm(false, false, rows, D1, m, scaled.data(), m, pre + 1, D1, 1.f, Y, D1);
      });
    });
  });
}

void linear_attention_normalize_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* y, float* o,
                                    float* den) {
  host_launch(ctx, [=] {
    const int64_t rows = s.heads * s.n, d = s.d;
#pragma omp parallel for if (rows * d > (1 << 16))
    for (int64_t i = 0; i < rows; ++i) {
      const float* yi = y + i * (d + 1);
      const float inv = 1.0f / guarded_denominator(yi[d]);
      for (int64_t k = 0; k < d; ++k) o[i * d + k] = yi[k] * inv;
      den[i] = yi[d];
    }
  });
}

void linear_attention_causal_backward_local_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                const float* phi_k, const float* c_k, const float* v, const float* o,
                                                const float* den, const float* row_scale, const float* d_o,
                                                float* d_phi_q, float* d_phi_k, float* d_v, float* block_total_grad) {
  host_launch(ctx, [=] {
    const int64_t n = s.n, m = s.m, d = s.d;
    for_each_head(ctx, s.heads, backward_workspace(s), [&](int64_t h) {
      backward_head(s, phi_q + h * n * m, phi_k + h * n * m, c_k + h * n, v + h * n * d, o + h * n * d, den + h * n,
                    row_scale + h * n, d_o + h * n * d, d_phi_q + h * n * m, d_phi_k + h * n * m, d_v + h * n * d,
                    block_total_grad + h * s.state_size());
    });
  });
}

void linear_attention_backward_add_prefix_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* o,
                                              const float* den, const float* row_scale, const float* d_o,
                                              const float* prefix, float* d_phi_q) {
  host_launch(ctx, [=] {
    const int64_t n = s.n, m = s.m, d = s.d, D1 = d + 1, rb = std::min(row_block(s), n);
    for_each_head(ctx, s.heads, rb * D1, [&](int64_t h) {
      const float* pre = prefix + h * s.state_size();
      const float b = pre[0];
      if (is_empty_log_scale(b)) return;
      std::vector<float> g(rb * D1);
      for_each_chunk(n, rb, false, [&](int64_t t0, int64_t rows) {
        const int64_t r0 = h * n + t0;
        load_gradient_rows(o + r0 * d, den + r0, d_o + r0 * d, rows, d, g.data());
        // rows of G scaled by exp(b - L_i), then d_phi_q += G_scaled Pre^T
        scale_rows(g.data(), rows, D1, D1, [&](int64_t i) { return log_scale_weight(b, row_scale[r0 + i]); });
        mm(false, true, rows, m, D1, g.data(), D1, pre + 1, D1, 1.f, d_phi_q + r0 * m, m);
      });
    });
  });
}

void linear_attention_backward_add_suffix_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                              const float* c_k, const float* v, const float* suffix, float* d_phi_k,
                                              float* d_v) {
  host_launch(ctx, [=] {
    const int64_t n = s.n, m = s.m, d = s.d, D1 = d + 1, rb = std::min(row_block(s), n);
    for_each_head(ctx, s.heads, rb * (D1 + m), [&](int64_t h) {
      const float* suf = suffix + h * s.state_size();
      const float rho = suf[0];
      if (is_empty_log_scale(rho)) return;
      std::vector<float> vp(rb * D1), scaled(rb * m);
      for_each_chunk(n, rb, false, [&](int64_t t0, int64_t rows) {
        const int64_t r0 = h * n + t0;
        const float *k = phi_k + r0 * m, *ct = c_k + r0;
        load_vprime(v + r0 * d, rows, d, vp.data());
        for (int64_t j = 0; j < rows; ++j) {
          const float w = log_scale_weight(ct[j], -rho);
          for (int64_t x = 0; x < D1; ++x) vp[j * D1 + x] *= w;
          for (int64_t f = 0; f < m; ++f) scaled[j * m + f] = w * k[j * m + f];
        }
        mm(false, true, rows, m, D1, vp.data(), D1, suf + 1, D1, 1.f, d_phi_k + r0 * m, m);
        mm(false, false, rows, d, m, scaled.data(), m, suf + 1, D1, 1.f, d_v + r0 * d, d);
      });
    });
  });
}

namespace {
// total [heads][state_size] = each head's state summed over its rows, a row
// block at a time: update(a, S, r0, rows, vals, scaled) loads the block's
// values (rows x D1, from row r0 of the call) into vals and adds the block to
// (a, S), with `scaled` as scratch.
template <typename Update>
void rows_state_cpu(const ExecContext& ctx, const LinAttnShape& s, float* total, Update update) {
  host_launch(ctx, [=] {
    const int64_t n = s.n, m = s.m, D1 = s.d + 1, rb = std::min(row_block(s), std::max<int64_t>(n, 1));
    for_each_head(ctx, s.heads, m * D1 + rb * (D1 + m), [&](int64_t h) {
      std::vector<float> S(m * D1, 0.f), vals(rb * D1), scaled(rb * m);
      float a = kEmptyLogScale;
      for_each_chunk(n, rb, false, [&](int64_t t0, int64_t rows) {
        update(a, S.data(), h * n + t0, rows, vals.data(), scaled.data());
      });
      store_state(a, S, total + h * s.state_size());
    });
  });
}
}  // namespace

void linear_attention_key_state_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k, const float* c_k,
                                    const float* v, float* total) {
  const int64_t m = s.m, d = s.d;
  rows_state_cpu(ctx, s, total, [=](float& a, float* S, int64_t r0, int64_t rows, float* vp, float* scaled) {
    load_vprime(v + r0 * d, rows, d, vp);
    key_state_update(a, S, rows, m, d + 1, phi_k + r0 * m, c_k + r0, vp, scaled);
  });
}

void linear_attention_query_state_cpu(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* o,
                                      const float* den, const float* row_scale, const float* d_o, float* total) {
  const int64_t m = s.m, d = s.d;
  rows_state_cpu(ctx, s, total, [=](float& rho, float* R, int64_t r0, int64_t rows, float* g, float* scaled) {
    load_gradient_rows(o + r0 * d, den + r0, d_o + r0 * d, rows, d, g);
    query_state_update(rho, R, rows, m, d + 1, phi_q + r0 * m, row_scale + r0, g, scaled);
  });
}

}  // namespace pf
