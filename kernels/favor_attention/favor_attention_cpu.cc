// Fused FAVOR+ on the CPU (favor_attention.h): one head per OpenMP thread, one
// chunk of C rows at a time. For each chunk the features of its q and k rows
// are made in the thread's tile (one sgemm U = s X W^T, then the vectorised
// rows of feature_map_rows.h), used at once by the tile routines of the
// chunked linear attention (linear_attention_tiles.h), and dropped:
//   forward (causal):   Y_t = diag(exp(a - L_i)) Pq S + mask(Pq Pk^T) V';  (a, S) (+)= chunk
//   backward sweep 1:   dPq_t = diag(exp(a - L_i)) G S^T + mask(G V'^T) Pk -> dq rows;  (a, S) (+)= chunk
//   backward sweep 2 (reverse, gradient state (rho, R)):
//     dPk_t = diag(exp(c_j + rho)) V' R^T + mask(G V'^T)^T Pq -> dk rows
//     dV_t  = diag(exp(c_j + rho)) Pk R[:, :d] + mask(Pq Pk^T)^T G[:, :d]
//     (rho, R) (+)= chunk
// Feature gradients go straight to dq, dk rows: dX = s T W - s^2 rowsum(T) X
// with T = dPhi . Phi (feature_map.h), and, when W is trained (exp), the
// head's dW += s T^T X from the same T. Every exponent is <= 0. Each entry
// point runs on ctx.stream (host_launch). Per thread in flight: the tile of
// tile_floats() below, O(C (m + d) + C^2 + m d), independent of n.
#include <algorithm>
#include <vector>

#include "kernels/favor_attention/favor_attention_backend.h"
#include "kernels/feature_map/feature_map_rows.h"
#include "kernels/linear_attention/linear_attention_tiles.h"
#include "runtime/row_spans.h"

namespace pf {
namespace {

using namespace cpu_tiles;

int64_t chunk_rows(const FavorShape& s) { return std::min(s.chunk, std::max<int64_t>(s.n, 1)); }

// The per-thread tile: every buffer one chunk of one head needs. `scaled`
// holds row-weighted copies of Pq, Pk (m columns) or V', G (D1 columns).
struct Tile {
  int64_t C, m, d, D1;
  std::vector<float> pq, pk, ck, vp, g, A, B, scaled, dphi, t, rowsum, dx, S;
  Tile(const FavorShape& s)
      : C(chunk_rows(s)),
        m(s.m),
        d(s.d),
        D1(s.d + 1),
        pq(C * m),
        pk(C * m),
        ck(C),
        vp(C * D1),
        g(C * D1),
        A(C * C),
        B(C * C),
        scaled(C * std::max(m, D1)),
        dphi(C * m),
        t(C * m),
        rowsum(C),
        dx(C * s.d),
        S(m * D1, 0.f) {}
  static int64_t floats(const FavorShape& s) {
    const int64_t C = chunk_rows(s), m = s.m, D1 = s.d + 1;
    return 4 * C * m + C * std::max(m, D1) + 2 * C + 2 * C * D1 + 2 * C * C + C * s.d + m * D1;
  }
};

// Features (and log-scales, when c != nullptr) of `rows` rows of X.
void features(const FeatureRowParams& r, int64_t rows, int64_t d, int64_t m, const float* X, const float* W, float* Phi,
              float* c) {
  gemm_f32_host(false, true, rows, m, d, r.data_scale, X, d, W, d, 0.f, Phi, m);
  feature_rows_finish(r, rows, d, m, X, Phi, c);
}

// dX (+)= the feature-map backward of dPhi given the features Phi; dW += s T^T X
// when dW is not nullptr.
void feature_grad(const FeatureRowParams& r, Tile& t, int64_t rows, const float* X, const float* W, const float* Phi,
                  const float* dPhi, float* dX, bool accumulate, float* dW) {
  const int64_t m = t.m, d = t.d;
  feature_rows_grad(r, rows, m, dPhi, Phi, true, t.t.data(), t.rowsum.data());
  if (dW) gemm_f32_host(true, false, m, d, rows, r.data_scale, t.t.data(), m, X, d, 1.f, dW, d);
  float* out = accumulate ? t.dx.data() : dX;
  gemm_f32_host(false, false, rows, d, m, r.data_scale, t.t.data(), m, W, d, 0.f, out, d);
  feature_rows_grad_finish(r, rows, d, X, t.rowsum.data(), out);
  if (accumulate)
    for (int64_t i = 0; i < rows * d; ++i) dX[i] += out[i];
}

void load_state(const float* packed, int64_t size, float& a, std::vector<float>& S) {
  a = packed[0];
  std::copy(packed + 1, packed + size, S.begin());
}

void clear_state(float& a, std::vector<float>& S) {
  a = kEmptyLogScale;
  std::fill(S.begin(), S.end(), 0.f);
}

// The keys of a chunk: features Pk with log-scales ck, and V' = [v 1].
void load_keys(const FeatureRowParams& r, Tile& t, int64_t rows, const float* k, const float* v, const float* W) {
  features(r, rows, t.d, t.m, k, W, t.pk.data(), t.ck.data());
  load_vprime(v, rows, t.d, t.vp.data());
}

// Everything a chunk of the causal backward reads, chunk rows from t0: the
// features of q and k, V' and the gradient rows G.
void load_chunk_grads(const FeatureRowParams& r, Tile& t, int64_t t0, int64_t rows, const float* q, const float* k,
                      const float* v, const float* W, const float* o, const float* den, const float* d_o) {
  const int64_t d = t.d;
  features(r, rows, d, t.m, q + t0 * d, W, t.pq.data(), nullptr);
  load_keys(r, t, rows, k + t0 * d, v + t0 * d, W);
  load_gradient_rows(o + t0 * d, den + t0, d_o + t0 * d, rows, d, t.g.data());
}

// The heads of a call as its queued work reads them: uniform blocks of n
// rows, or the pieces' table (host memory released in the stream's order:
// it outlives the queued work, the FavorPieces object need not).
struct SpanTable {
  int64_t count = 0, slots = 0;
  const int64_t* table = nullptr;  // [count][3] (row0, len, head), or null
  explicit SpanTable(const FavorShape& s)
      : count(s.heads), slots(s.pieces ? s.pieces->slots() : s.heads), table(s.pieces ? s.pieces->table() : nullptr) {}
  FavorSpan at(int64_t h, int64_t n) const { return span_of(table, h, n); }
};

// Runs f(h, x, shape, tile) for every head h of the call, x its rows and
// shape the block of one head of x.len rows (s itself when the call is
// uniform), with one tile per thread in flight. Over pieces, the heads that
// add to one dW slot run one after another in their order (so their dW adds
// in that order, as calls piece by piece would), different slots in
// parallel; every head's arithmetic is that of a block of its rows alone.
template <typename F>
void for_each_head_tile(const ExecContext& ctx, const FavorShape& s, const SpanTable& heads, F&& f) {
  if (!heads.table) {
    for_each_head(ctx, s.heads, Tile::floats(s), [&](int64_t h) {
      Tile tile(s);
      f(h, heads.at(h, s.n), s, tile);
    });
    return;
  }
  std::vector<std::vector<int64_t>> lanes(static_cast<size_t>(heads.slots));
  for (int64_t h = 0; h < heads.count; ++h) lanes[static_cast<size_t>(heads.at(h, s.n).head)].push_back(h);
  for_each_head(ctx, static_cast<int64_t>(lanes.size()), Tile::floats(s), [&](int64_t l) {
    for (int64_t h : lanes[static_cast<size_t>(l)]) {
      const FavorSpan x = heads.at(h, s.n);
      const FavorShape one = favor_span_shape(s, x.len);
      Tile tile(one);
      f(h, x, one, tile);
    }
  });
}

// Queues on ctx.stream f(h, x, one, r, tile) for every head of the call
// (for_each_head_tile), r the feature-row parameters of s.
template <typename F>
void launch_heads(const ExecContext& ctx, const FavorShape& s, F f) {
  const SpanTable heads(s);
  host_launch(ctx, [=] {
    const FeatureRowParams r(s.features, s.m);
    for_each_head_tile(ctx, s, heads,
                       [&](int64_t h, const FavorSpan& x, const FavorShape& one, Tile& t) { f(h, x, one, r, t); });
  });
}

// The dW slot [m, d] of span x's head, or null.
float* head_grad(float* dW, const FavorShape& s, const FavorSpan& x) { return dW ? dW + x.head * s.m * s.d : nullptr; }

void key_state_head(const FavorShape& s, const FeatureRowParams& r, const float* k, const float* v, const float* W,
                    float* total, Tile& t) {
  const int64_t m = s.m, d = s.d, D1 = d + 1;
  float a = kEmptyLogScale;
  for_each_chunk(s.n, t.C, false, [&](int64_t t0, int64_t rows) {
    load_keys(r, t, rows, k + t0 * d, v + t0 * d, W);
    key_state_update(a, t.S.data(), rows, m, D1, t.pk.data(), t.ck.data(), t.vp.data(), t.scaled.data());
  });
  store_state(a, t.S, total);
}

void causal_forward_head(const FavorShape& s, const FeatureRowParams& r, const float* q, const float* k, const float* v,
                         const float* W, float* y, float* L, float* total, Tile& t) {
  const int64_t m = s.m, d = s.d, D1 = d + 1;
  float a = kEmptyLogScale;
  for_each_chunk(s.n, t.C, false, [&](int64_t t0, int64_t rows) {
    float *Y = y + t0 * D1, *Lt = L + t0;
    features(r, rows, d, m, q + t0 * d, W, t.pq.data(), nullptr);
    load_keys(r, t, rows, k + t0 * d, v + t0 * d, W);
    float run = a;
    for (int64_t i = 0; i < rows; ++i) Lt[i] = run = max_log_scale(run, t.ck[i]);
    if (is_empty_log_scale(a)) {
      zero_rows(Y, rows, D1, D1);
    } else {
      mm(false, false, rows, D1, m, t.pq.data(), m, t.S.data(), D1, 0.f, Y, D1);
      scale_rows(Y, rows, D1, D1, [&](int64_t i) { return log_scale_weight(a, Lt[i]); });
    }
    mm(false, true, rows, rows, m, t.pq.data(), m, t.pk.data(), m, 0.f, t.A.data(), rows);
    causal_mask(t.A.data(), rows, t.ck.data(), Lt);
    mm(false, false, rows, D1, rows, t.A.data(), rows, t.vp.data(), D1, 1.f, Y, D1);
    key_state_update(a, t.S.data(), rows, m, D1, t.pk.data(), t.ck.data(), t.vp.data(), t.scaled.data());
  });
  store_state(a, t.S, total);
}

// y_i <- exp(L_i - L'_i) y_i + exp(b - L'_i) phi_q[i] Pre, L'_i = max(L_i, b); the product
// goes through vp (D1 columns) so that both weights apply in one pass over y.
void add_prefix_head(const FavorShape& s, const FeatureRowParams& r, const float* q, const float* W,
                     const float* prefix, float* y, float* L, Tile& t) {
  const int64_t m = s.m, d = s.d, D1 = d + 1;
  const float b = prefix[0];
  if (is_empty_log_scale(b)) return;
  for_each_chunk(s.n, t.C, false, [&](int64_t t0, int64_t rows) {
    float *Y = y + t0 * D1, *Lt = L + t0;
    features(r, rows, d, m, q + t0 * d, W, t.pq.data(), nullptr);
    float* P = t.vp.data();
    mm(false, false, rows, D1, m, t.pq.data(), m, prefix + 1, D1, 0.f, P, D1);
    for (int64_t i = 0; i < rows; ++i) {
      const float top = max_log_scale(Lt[i], b), wy = log_scale_weight(Lt[i], top), wp = log_scale_weight(b, top);
      for (int64_t x = 0; x < D1; ++x) Y[i * D1 + x] = wy * Y[i * D1 + x] + wp * P[i * D1 + x];
      Lt[i] = top;
    }
  });
}

// Sweep 1 of the causal backward: dq, starting from the forward prefix state.
void causal_dq_sweep(const FavorShape& s, const FeatureRowParams& r, const float* q, const float* k, const float* v,
                     const float* W, const float* o, const float* den, const float* L, const float* d_o,
                     const float* prefix, float* dq, float* dW, Tile& t) {
  const int64_t m = s.m, d = s.d, D1 = d + 1;
  float a;
  if (prefix) {
    load_state(prefix, s.state_size(), a, t.S);
  } else {
    clear_state(a, t.S);
  }
  for_each_chunk(s.n, t.C, false, [&](int64_t t0, int64_t rows) {
    const float* Lt = L + t0;
    load_chunk_grads(r, t, t0, rows, q, k, v, W, o, den, d_o);
    float* dP = t.dphi.data();
    if (is_empty_log_scale(a)) {
      zero_rows(dP, rows, m, m);
    } else {
      // The row weights go on G (D1 columns) rather than on the product (m columns).
      scaled_rows(t.g.data(), rows, D1, t.scaled.data(), [&](int64_t i) { return log_scale_weight(a, Lt[i]); });
      mm(false, true, rows, m, D1, t.scaled.data(), D1, t.S.data(), D1, 0.f, dP, m);
    }
    mm(false, true, rows, rows, D1, t.g.data(), D1, t.vp.data(), D1, 0.f, t.B.data(), rows);
    causal_mask(t.B.data(), rows, t.ck.data(), Lt);
    mm(false, false, rows, m, rows, t.B.data(), rows, t.pk.data(), m, 1.f, dP, m);
    feature_grad(r, t, rows, q + t0 * d, W, t.pq.data(), dP, dq + t0 * d, false, dW);
    key_state_update(a, t.S.data(), rows, m, D1, t.pk.data(), t.ck.data(), t.vp.data(), t.scaled.data());
  });
}

// Sweep 2 of the causal backward: dk, dv and the gradient block total, in reverse.
void causal_dkv_sweep(const FavorShape& s, const FeatureRowParams& r, const float* q, const float* k, const float* v,
                      const float* W, const float* o, const float* den, const float* L, const float* d_o, float* dk,
                      float* dv, float* total, float* dW, Tile& t) {
  const int64_t m = s.m, d = s.d, D1 = d + 1;
  std::vector<float>& R = t.S;
  float rho;
  clear_state(rho, R);
  for_each_chunk(s.n, t.C, true, [&](int64_t t0, int64_t rows) {
    const float* Lt = L + t0;
    float* dV = dv + t0 * d;
    float* dP = t.dphi.data();
    load_chunk_grads(r, t, t0, rows, q, k, v, W, o, den, d_o);
    if (is_empty_log_scale(rho)) {
      zero_rows(dP, rows, m, m);
      zero_rows(dV, rows, d, d);
    } else {
      // The row weights go on V' (D1 columns) rather than on dPk (m columns).
      const auto w = [&](int64_t j) { return log_scale_weight(t.ck[j], -rho); };
      scaled_rows(t.vp.data(), rows, D1, t.scaled.data(), w);
      mm(false, true, rows, m, D1, t.scaled.data(), D1, R.data(), D1, 0.f, dP, m);
      mm(false, false, rows, d, m, t.pk.data(), m, R.data(), D1, 0.f, dV, d);
      scale_rows(dV, rows, d, d, w);
    }
    mm(false, true, rows, rows, m, t.pq.data(), m, t.pk.data(), m, 0.f, t.A.data(), rows);
    causal_mask(t.A.data(), rows, t.ck.data(), Lt);
    mm(false, true, rows, rows, D1, t.g.data(), D1, t.vp.data(), D1, 0.f, t.B.data(), rows);
    causal_mask(t.B.data(), rows, t.ck.data(), Lt);
    mm(true, false, rows, m, rows, t.B.data(), rows, t.pq.data(), m, 1.f, dP, m);
    mm(true, false, rows, d, rows, t.A.data(), rows, t.g.data(), D1, 1.f, dV, d);
    feature_grad(r, t, rows, k + t0 * d, W, t.pk.data(), dP, dk + t0 * d, false, dW);
    query_state_update(rho, R.data(), rows, m, D1, t.pq.data(), Lt, t.g.data(), t.scaled.data());
  });
  store_state(rho, R, total);
}

// With the gradient state (rho, R) of later keys: dPk = diag(exp(c_j + rho)) V' R^T,
// dV (+)= diag(exp(c_j + rho)) Pk R[:, :d]; dk (+)= the feature backward of dPk.
void key_grad_from_state_head(const FavorShape& s, const FeatureRowParams& r, const float* k, const float* v,
                              const float* W, const float* state, float* dk, float* dv, bool accumulate, float* dW,
                              Tile& t) {
  const int64_t n = s.n, m = s.m, d = s.d, D1 = d + 1;
  const float rho = state[0];
  if (is_empty_log_scale(rho)) {
    if (!accumulate) {
      std::fill(dk, dk + n * d, 0.f);
      std::fill(dv, dv + n * d, 0.f);
    }
    return;
  }
  for_each_chunk(n, t.C, false, [&](int64_t t0, int64_t rows) {
    load_keys(r, t, rows, k + t0 * d, v + t0 * d, W);
    for (int64_t j = 0; j < rows; ++j) {
      const float w = log_scale_weight(t.ck[j], -rho);
      for (int64_t x = 0; x < D1; ++x) t.vp[j * D1 + x] *= w;
      for (int64_t f = 0; f < m; ++f) t.scaled[j * m + f] = w * t.pk[j * m + f];
    }
    mm(false, true, rows, m, D1, t.vp.data(), D1, state + 1, D1, 0.f, t.dphi.data(), m);
    mm(false, false, rows, d, m, t.scaled.data(), m, state + 1, D1, accumulate ? 1.f : 0.f, dv + t0 * d, d);
    feature_grad(r, t, rows, k + t0 * d, W, t.pk.data(), t.dphi.data(), dk + t0 * d, accumulate, dW);
  });
}

// y, row_scale (+)= the state's part; clear: first y = 0 and row_scale empty
// (the bidirectional finish).
void add_prefix_all(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W, const float* prefix,
                    float* y, float* row_scale, bool clear) {
  launch_heads(ctx, s, [=](int64_t h, const FavorSpan& x, const FavorShape& one, const FeatureRowParams& r, Tile& t) {
    const int64_t d = s.d;
    float* Y = y + x.row0 * (d + 1);
    float* L = row_scale + x.row0;
    if (clear) {
      std::fill(Y, Y + x.len * (d + 1), 0.f);
      std::fill(L, L + x.len, kEmptyLogScale);
    }
    add_prefix_head(one, r, q + x.row0 * d, s.head_w(W, x.head), prefix + h * s.state_size(), Y, L, t);
  });
}

// dk, dv (+)= the keys' part of a gradient state per head (suffix, or the
// bidirectional total).
void key_grad_from_state_all(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                             const float* W, const float* state, float* dk, float* dv, bool accumulate, float* dW) {
  launch_heads(ctx, s, [=](int64_t h, const FavorSpan& x, const FavorShape& one, const FeatureRowParams& r, Tile& t) {
    const int64_t e = x.row0 * s.d;
    key_grad_from_state_head(one, r, k + e, v + e, s.head_w(W, x.head), state + h * s.state_size(), dk + e, dv + e,
                             accumulate, head_grad(dW, s, x), t);
  });
}

}  // namespace

int64_t favor_tile_floats_cpu(const FavorShape& s) { return Tile::floats(s); }

void favor_key_state_cpu(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                         float* total) {
  launch_heads(ctx, s, [=](int64_t h, const FavorSpan& x, const FavorShape& one, const FeatureRowParams& r, Tile& t) {
    const int64_t e = x.row0 * s.d;
    key_state_head(one, r, k + e, v + e, s.head_w(W, x.head), total + h * s.state_size(), t);
  });
}

void favor_causal_forward_local_cpu(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                    const float* v, const float* W, float* y, float* row_scale, float* block_total) {
  launch_heads(ctx, s, [=](int64_t h, const FavorSpan& x, const FavorShape& one, const FeatureRowParams& r, Tile& t) {
    const int64_t e = x.row0 * s.d;
    causal_forward_head(one, r, q + e, k + e, v + e, s.head_w(W, x.head), y + x.row0 * (s.d + 1), row_scale + x.row0,
                        block_total + h * s.state_size(), t);
  });
}

void favor_add_prefix_cpu(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                          const float* prefix, float* y, float* row_scale) {
  add_prefix_all(ctx, s, q, W, prefix, y, row_scale, false);
}

void favor_causal_backward_local_cpu(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                                     const float* v, const float* W, const float* o, const float* den,
                                     const float* row_scale, const float* d_o, const float* prefix, float* dq,
                                     float* dk, float* dv, float* block_total_grad, float* dW) {
  launch_heads(ctx, s, [=](int64_t h, const FavorSpan& x, const FavorShape& one, const FeatureRowParams& r, Tile& t) {
    const int64_t e = x.row0 * s.d, row = x.row0, ss = s.state_size();
    const float* Wh = s.head_w(W, x.head);
    float* dWh = head_grad(dW, s, x);
    causal_dq_sweep(one, r, q + e, k + e, v + e, Wh, o + e, den + row, row_scale + row, d_o + e,
                    prefix ? prefix + h * ss : nullptr, dq + e, dWh, t);
    causal_dkv_sweep(one, r, q + e, k + e, v + e, Wh, o + e, den + row, row_scale + row, d_o + e, dk + e, dv + e,
                     block_total_grad + h * ss, dWh, t);
  });
}

void favor_backward_add_suffix_cpu(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                   const float* W, const float* suffix, float* dk, float* dv, float* dW) {
  key_grad_from_state_all(ctx, s, k, v, W, suffix, dk, dv, true, dW);
}

void favor_bidirectional_forward_finish_cpu(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                            const float* total, float* y, float* row_scale) {
  add_prefix_all(ctx, s, q, W, total, y, row_scale, true);
}

void favor_bidirectional_backward_local_cpu(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                            const float* o, const float* den, const float* row_scale, const float* d_o,
                                            const float* total, float* dq, float* local_grad_total, float* dW) {
  launch_heads(
      ctx, s, [=](int64_t h, const FavorSpan& span, const FavorShape& one, const FeatureRowParams& r, Tile& t) {
        const int64_t m = s.m, d = s.d, D1 = d + 1, ss = s.state_size();
        const int64_t x = span.row0 * d, row = span.row0;
        const float* Wh = s.head_w(W, span.head);
        float* dWh = head_grad(dW, s, span);
        const float* tot = total + h * ss;
        const float b = tot[0];
        std::vector<float>& R = t.S;
        float rho;
        clear_state(rho, R);
        for_each_chunk(one.n, t.C, false, [&](int64_t t0, int64_t rows) {
          const float* Lt = row_scale + row + t0;
          features(r, rows, d, m, q + x + t0 * d, Wh, t.pq.data(), nullptr);
          load_gradient_rows(o + x + t0 * d, den + row + t0, d_o + x + t0 * d, rows, d, t.g.data());
          // dPq = diag(exp(b - L_i)) G Tot^T (the scaled G in vp)
          for (int64_t i = 0; i < rows; ++i) {
            const float w = is_empty_log_scale(b) ? 0.f : log_scale_weight(b, Lt[i]);
            for (int64_t c = 0; c < D1; ++c) t.vp[i * D1 + c] = w * t.g[i * D1 + c];
          }
          if (is_empty_log_scale(b)) {
            zero_rows(t.dphi.data(), rows, m, m);
          } else {
            mm(false, true, rows, m, D1, t.vp.data(), D1, tot + 1, D1, 0.f, t.dphi.data(), m);
          }
          feature_grad(r, t, rows, q + x + t0 * d, Wh, t.pq.data(), t.dphi.data(), dq + x + t0 * d, false, dWh);
          query_state_update(rho, R.data(), rows, m, D1, t.pq.data(), Lt, t.g.data(), t.scaled.data());
        });
        store_state(rho, R, local_grad_total + h * ss);
      });
}

void favor_bidirectional_backward_finish_cpu(const ExecContext& ctx, const FavorShape& s, const float* k,
                                             const float* v, const float* W, const float* grad_total, float* dk,
                                             float* dv, float* dW) {
  key_grad_from_state_all(ctx, s, k, v, W, grad_total, dk, dv, false, dW);
}

}  // namespace pf
