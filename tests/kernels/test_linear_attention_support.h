// Shared helpers of the linear-attention tests: random problems (features in
// (0, m^-1/2], key log-scales in [-c_max, c_max]), the whole-block CPU forward
// and backward (causal and bidirectional), and the float64 reference per head.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/random.h"
#include "tests/support/numerics.h"

namespace pf::test {

struct LinAttnProblem {
  LinAttnShape s;
  std::vector<float> pq, pk, ck, v, d_o;  // [heads, n, m] x2, [heads, n], [heads, n, d] x2
};

inline std::vector<float> uniform_vector(int64_t count, uint64_t seed, uint64_t stream, float lo, float hi) {
  KeyedRandom rng(seed, stream, 0x11a);
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[i] = lo + (hi - lo) * static_cast<float>(rng.uniform(i));
  return out;
}

// Positive features in (0, m^-1/2]: m^-1/2 (1 - u), u in [0, 1).
inline std::vector<float> feature_vector(int64_t count, int64_t m, uint64_t seed, uint64_t stream) {
  std::vector<float> f = uniform_vector(count, seed, stream, 0.f, 1.f);
  const float top = 1.0f / std::sqrt(static_cast<float>(m));
  for (float& x : f) x = top * (1.0f - x);
  return f;
}

inline LinAttnProblem make_problem(int64_t heads, int64_t n, int64_t m, int64_t d, int64_t chunk, uint64_t seed,
                                   float c_max = 20.f) {
  LinAttnProblem p;
  p.s = LinAttnShape{heads, n, m, d, chunk};
  p.pq = feature_vector(heads * n * m, m, seed, 1);
  p.pk = feature_vector(heads * n * m, m, seed, 2);
  p.ck = uniform_vector(heads * n, seed, 3, -c_max, c_max);
  p.v = cast_vector<float>(normal_vector(heads * n * d, seed, 4));
  p.d_o = cast_vector<float>(normal_vector(heads * n * d, seed, 5));
  return p;
}

struct LinAttnForward {
  std::vector<float> y, row_scale, total, o, den;
};

struct LinAttnBackward {
  std::vector<float> dq, dk, dv, total;
};

inline ExecContext cpu_context() { return ExecContext{}; }

// Whole-block forward: causal (from `initial` when given) or bidirectional.
inline LinAttnForward forward_cpu(const LinAttnProblem& p, bool causal, const float* initial = nullptr) {
  const LinAttnShape& s = p.s;
  const ExecContext ctx = cpu_context();
  LinAttnForward f;
  f.y.resize(s.heads * s.n * (s.d + 1));
  f.row_scale.resize(s.heads * s.n);
  f.total.resize(s.heads * s.state_size());
  f.o.resize(s.heads * s.n * s.d);
  f.den.resize(s.heads * s.n);
  if (causal) {
    causal_linear_attention_forward_local(ctx, s, p.pq.data(), p.pk.data(), p.ck.data(), p.v.data(), f.y.data(),
                                          f.row_scale.data(), f.total.data(), initial);
  } else {
    bidirectional_linear_attention_local_state(ctx, s, p.pk.data(), p.ck.data(), p.v.data(), f.total.data());
    bidirectional_linear_attention_forward_finish(ctx, s, p.pq.data(), f.total.data(), f.y.data(), f.row_scale.data());
  }
  linear_attention_normalize(ctx, s, f.y.data(), f.o.data(), f.den.data());
  return f;
}

// Whole-block backward on the outputs of forward_cpu.
inline LinAttnBackward backward_cpu(const LinAttnProblem& p, const LinAttnForward& f, bool causal) {
  const LinAttnShape& s = p.s;
  const ExecContext ctx = cpu_context();
  LinAttnBackward b;
  b.dq.resize(s.heads * s.n * s.m);
  b.dk.resize(s.heads * s.n * s.m);
  b.dv.resize(s.heads * s.n * s.d);
  b.total.resize(s.heads * s.state_size());
  if (causal) {
    causal_linear_attention_backward_local(ctx, s, p.pq.data(), p.pk.data(), p.ck.data(), p.v.data(), f.o.data(),
                                           f.den.data(), f.row_scale.data(), p.d_o.data(), b.dq.data(), b.dk.data(),
                                           b.dv.data(), b.total.data(), nullptr, nullptr);
  } else {
    bidirectional_linear_attention_backward_local(ctx, s, p.pq.data(), f.o.data(), f.den.data(), f.row_scale.data(),
                                                  p.d_o.data(), f.total.data(), b.dq.data(), b.total.data());
    bidirectional_linear_attention_backward_finish(ctx, s, p.pk.data(), p.ck.data(), p.v.data(), b.total.data(),
                                                   b.dk.data(), b.dv.data());
  }
  return b;
}

struct LinAttnReference {
  std::vector<double> o, dq, dk, dv;
};

inline LinAttnReference reference(const LinAttnProblem& p, bool causal, bool with_backward) {
  const LinAttnShape& s = p.s;
  const int64_t n = s.n, m = s.m, d = s.d;
  LinAttnReference r;
  r.o.resize(s.heads * n * d);
  if (with_backward) {
    r.dq.resize(s.heads * n * m);
    r.dk.resize(s.heads * n * m);
    r.dv.resize(s.heads * n * d);
  }
  for (int64_t h = 0; h < s.heads; ++h) {
    auto slice = [&](const std::vector<float>& x, int64_t len) {
      return std::vector<double>(x.begin() + h * len, x.begin() + (h + 1) * len);
    };
    const auto q = slice(p.pq, n * m), k = slice(p.pk, n * m), c = slice(p.ck, n), v = slice(p.v, n * d);
    linear_attention_forward_ref(causal, n, m, d, q.data(), k.data(), c.data(), v.data(), r.o.data() + h * n * d);
    if (with_backward) {
      const auto g = slice(p.d_o, n * d);
      linear_attention_backward_ref(causal, n, m, d, q.data(), k.data(), c.data(), v.data(), g.data(),
                                    r.dq.data() + h * n * m, r.dk.data() + h * n * m, r.dv.data() + h * n * d);
    }
  }
  return r;
}

}  // namespace pf::test
