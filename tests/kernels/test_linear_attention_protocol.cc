// The sequence-parallel protocol of linear attention on one process: a sequence
// cut into P blocks whose block totals are combined by exclusive scans in a
// plain loop (forward scan, reverse scan in the backward; allreduce for the
// bidirectional kernels) equals the unsplit result; the deferred-prefix form
// equals the one-call form; strict causality; the state combine is associative
// with the empty state as identity.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/test_linear_attention_support.h"

namespace pf {
namespace {

using test::LinAttnProblem;
using test::rel_l2;

// Rows [lo, hi) of every head.
LinAttnProblem slice_problem(const LinAttnProblem& p, int64_t lo, int64_t hi) {
  LinAttnProblem r;
  r.s = p.s;
  r.s.n = hi - lo;
  auto cut = [&](const std::vector<float>& x, int64_t width) {
    std::vector<float> out;
    for (int64_t h = 0; h < p.s.heads; ++h)
      out.insert(out.end(), x.begin() + (h * p.s.n + lo) * width, x.begin() + (h * p.s.n + hi) * width);
    return out;
  };
  r.pq = cut(p.pq, p.s.m);
  r.pk = cut(p.pk, p.s.m);
  r.ck = cut(p.ck, 1);
  r.v = cut(p.v, p.s.d);
  r.d_o = cut(p.d_o, p.s.d);
  return r;
}

// Concatenates per-block [heads, n_r, width] arrays into [heads, n, width].
std::vector<float> join(const std::vector<std::vector<float>>& parts, const std::vector<int64_t>& cuts, int64_t heads,
                        int64_t width) {
  std::vector<float> out;
  for (int64_t h = 0; h < heads; ++h)
    for (size_t r = 0; r < parts.size(); ++r) {
      const int64_t len = (cuts[r + 1] - cuts[r]) * width;
      out.insert(out.end(), parts[r].begin() + h * len, parts[r].begin() + (h + 1) * len);
    }
  return out;
}

std::vector<float> empty_states(const LinAttnShape& s) {
  std::vector<float> st(s.heads * s.state_size());
  linear_attention_state_clear(ExecContext{}, s, st.data());
  return st;
}

std::vector<float> combined(const LinAttnShape& s, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  linear_attention_state_combine(ExecContext{}, s.heads, s.m, s.d, a.data(), b.data(), out.data());
  return out;
}

// Blocks of unequal lengths, one of them shorter than a chunk.
std::vector<int64_t> block_cuts(int64_t n, int P) {
  std::vector<int64_t> cuts{0};
  for (int r = 1; r < P; ++r) cuts.push_back(n * r / P + (r % 2 ? 7 : -5));
  cuts.push_back(n);
  if (P >= 3) cuts[1] = 3;
  return cuts;
}

void check_split_causal(int P, bool one_call) {
  const auto p = test::make_problem(2, 517, 64, 16, 64, 600 + P);
  const auto whole_f = test::forward_cpu(p, true);
  const auto whole_b = test::backward_cpu(p, whole_f, true);
  const auto cuts = block_cuts(p.s.n, P);
  const ExecContext ctx;
  std::vector<LinAttnProblem> blocks;
  for (int r = 0; r < P; ++r) blocks.push_back(slice_problem(p, cuts[r], cuts[r + 1]));

  // Forward: local blocks, exclusive scan of the block totals, prefix, normalise.
  std::vector<test::LinAttnForward> f(P);
  std::vector<std::vector<float>> prefix(P);
  for (int r = 0; r < P; ++r) {
    const auto& b = blocks[r];
    auto& fr = f[r];
    fr.y.resize(b.s.heads * b.s.n * (b.s.d + 1));
    fr.row_scale.resize(b.s.heads * b.s.n);
    fr.total.resize(b.s.heads * b.s.state_size());
    causal_linear_attention_forward_local(ctx, b.s, b.pq.data(), b.pk.data(), b.ck.data(), b.v.data(), fr.y.data(),
                                          fr.row_scale.data(), fr.total.data(), nullptr);
  }
  prefix[0] = empty_states(p.s);
  for (int r = 1; r < P; ++r) prefix[r] = combined(p.s, prefix[r - 1], f[r - 1].total);
  for (int r = 0; r < P; ++r) {
    const auto& b = blocks[r];
    if (one_call) {
      f[r] = test::forward_cpu(b, true, prefix[r].data());
    } else {
      linear_attention_add_prefix(ctx, b.s, b.pq.data(), prefix[r].data(), f[r].y.data(), f[r].row_scale.data());
      f[r].o.resize(b.s.heads * b.s.n * b.s.d);
      f[r].den.resize(b.s.heads * b.s.n);
      linear_attention_normalize(ctx, b.s, f[r].y.data(), f[r].o.data(), f[r].den.data());
    }
  }
  std::vector<std::vector<float>> o, L;
  for (auto& fr : f) {
    o.push_back(fr.o);
    L.push_back(fr.row_scale);
  }
  EXPECT_LE(rel_l2(join(o, cuts, p.s.heads, p.s.d), whole_f.o), 1e-6) << "P=" << P;
  EXPECT_EQ(join(L, cuts, p.s.heads, 1), whole_f.row_scale) << "P=" << P;

  // Backward: local blocks, reverse exclusive scan of the gradient totals, then
  // the prefix part of d_phi_q and the suffix part of d_phi_k, d_v.
  std::vector<test::LinAttnBackward> g(P);
  std::vector<std::vector<float>> suffix(P);
  for (int r = 0; r < P; ++r) {
    const auto& b = blocks[r];
    auto& gr = g[r];
    gr.dq.resize(b.s.heads * b.s.n * b.s.m);
    gr.dk.resize(b.s.heads * b.s.n * b.s.m);
    gr.dv.resize(b.s.heads * b.s.n * b.s.d);
    gr.total.resize(b.s.heads * b.s.state_size());
    causal_linear_attention_backward_local(ctx, b.s, b.pq.data(), b.pk.data(), b.ck.data(), b.v.data(), f[r].o.data(),
                                           f[r].den.data(), f[r].row_scale.data(), b.d_o.data(), gr.dq.data(),
                                           gr.dk.data(), gr.dv.data(), gr.total.data(), nullptr, nullptr);
  }
  suffix[P - 1] = empty_states(p.s);
  for (int r = P - 2; r >= 0; --r) suffix[r] = combined(p.s, g[r + 1].total, suffix[r + 1]);
  for (int r = 0; r < P; ++r) {
    const auto& b = blocks[r];
    linear_attention_backward_add_prefix(ctx, b.s, f[r].o.data(), f[r].den.data(), f[r].row_scale.data(), b.d_o.data(),
                                         prefix[r].data(), g[r].dq.data());
    linear_attention_backward_add_suffix(ctx, b.s, b.pk.data(), b.ck.data(), b.v.data(), suffix[r].data(),
                                         g[r].dk.data(), g[r].dv.data());
  }
  std::vector<std::vector<float>> dq, dk, dv;
  for (auto& gr : g) {
    dq.push_back(gr.dq);
    dk.push_back(gr.dk);
    dv.push_back(gr.dv);
  }
  EXPECT_LE(rel_l2(join(dq, cuts, p.s.heads, p.s.m), whole_b.dq), 1e-6) << "P=" << P;
  EXPECT_LE(rel_l2(join(dk, cuts, p.s.heads, p.s.m), whole_b.dk), 1e-6) << "P=" << P;
  EXPECT_LE(rel_l2(join(dv, cuts, p.s.heads, p.s.d), whole_b.dv), 1e-6) << "P=" << P;
  // The block totals scanned to the end are the whole sequence's totals.
  EXPECT_LE(rel_l2(combined(p.s, prefix[P - 1], f[P - 1].total), whole_f.total), 1e-6) << "P=" << P;
  EXPECT_LE(rel_l2(combined(p.s, g[0].total, suffix[0]), whole_b.total), 1e-6) << "P=" << P;
}

TEST(LinearAttentionProtocol, CausalBlocksWithScansEqualWhole) {
  for (int P : {2, 3, 5}) check_split_causal(P, false);
}

TEST(LinearAttentionProtocol, InitialStateEqualsDeferredPrefix) {
  for (int P : {2, 3}) check_split_causal(P, true);
}

TEST(LinearAttentionProtocol, BidirectionalBlocksWithAllreduceEqualWhole) {
  const ExecContext ctx;
  for (int P : {2, 3, 5}) {
    const auto p = test::make_problem(2, 401, 100, 32, 64, 700 + P);
    const auto whole_f = test::forward_cpu(p, false);
    const auto whole_b = test::backward_cpu(p, whole_f, false);
    const auto cuts = block_cuts(p.s.n, P);
    std::vector<LinAttnProblem> blocks;
    std::vector<float> total = empty_states(p.s), grad_total = empty_states(p.s);
    std::vector<test::LinAttnForward> f(P);
    for (int r = 0; r < P; ++r) {
      blocks.push_back(slice_problem(p, cuts[r], cuts[r + 1]));
      std::vector<float> local(p.s.heads * p.s.state_size());
      bidirectional_linear_attention_local_state(ctx, blocks[r].s, blocks[r].pk.data(), blocks[r].ck.data(),
                                                 blocks[r].v.data(), local.data());
      total = combined(p.s, total, local);
    }
    std::vector<std::vector<float>> o, dq, dk, dv;
    for (int r = 0; r < P; ++r) {
      const auto& b = blocks[r];
      auto& fr = f[r];
      fr.y.resize(b.s.heads * b.s.n * (b.s.d + 1));
      fr.row_scale.resize(b.s.heads * b.s.n);
      fr.o.resize(b.s.heads * b.s.n * b.s.d);
      fr.den.resize(b.s.heads * b.s.n);
      bidirectional_linear_attention_forward_finish(ctx, b.s, b.pq.data(), total.data(), fr.y.data(),
                                                    fr.row_scale.data());
      linear_attention_normalize(ctx, b.s, fr.y.data(), fr.o.data(), fr.den.data());
      o.push_back(fr.o);
      std::vector<float> local(p.s.heads * p.s.state_size()), q(b.s.heads * b.s.n * b.s.m);
      bidirectional_linear_attention_backward_local(ctx, b.s, b.pq.data(), fr.o.data(), fr.den.data(),
                                                    fr.row_scale.data(), b.d_o.data(), total.data(), q.data(),
                                                    local.data());
      grad_total = combined(p.s, grad_total, local);
      dq.push_back(q);
    }
    for (int r = 0; r < P; ++r) {
      const auto& b = blocks[r];
      std::vector<float> k(b.s.heads * b.s.n * b.s.m), v(b.s.heads * b.s.n * b.s.d);
      bidirectional_linear_attention_backward_finish(ctx, b.s, b.pk.data(), b.ck.data(), b.v.data(), grad_total.data(),
                                                     k.data(), v.data());
      dk.push_back(k);
      dv.push_back(v);
    }
    EXPECT_LE(rel_l2(join(o, cuts, p.s.heads, p.s.d), whole_f.o), 1e-6) << "P=" << P;
    EXPECT_LE(rel_l2(join(dq, cuts, p.s.heads, p.s.m), whole_b.dq), 1e-6) << "P=" << P;
    EXPECT_LE(rel_l2(join(dk, cuts, p.s.heads, p.s.m), whole_b.dk), 1e-6) << "P=" << P;
    EXPECT_LE(rel_l2(join(dv, cuts, p.s.heads, p.s.d), whole_b.dv), 1e-6) << "P=" << P;
  }
}

// Changing phi_q, phi_k, v or c_k after position i (inside i's chunk and in
// later chunks; key log-scales raised to +80 so a chunk-wide stabiliser would
// underflow the earlier keys) leaves outputs <= i unchanged.
TEST(LinearAttentionProtocol, StrictCausality) {
  const auto p = test::make_problem(2, 300, 64, 16, 64, 800);
  const auto base = test::forward_cpu(p, true);
  for (int64_t i : {0, 100, 127, 128, 250}) {
    auto q = p;
    const auto noise = test::make_problem(2, 300, 64, 16, 64, 900 + i);
    for (int64_t h = 0; h < p.s.heads; ++h)
      for (int64_t j = i + 1; j < p.s.n; ++j) {
        const int64_t r = h * p.s.n + j;
        for (int64_t f = 0; f < p.s.m; ++f) {
          q.pq[r * p.s.m + f] = noise.pq[r * p.s.m + f];
          q.pk[r * p.s.m + f] = noise.pk[r * p.s.m + f];
        }
        for (int64_t k = 0; k < p.s.d; ++k) q.v[r * p.s.d + k] = 10.f * noise.v[r * p.s.d + k];
        q.ck[r] = j % 3 ? 80.f : noise.ck[r];
      }
    const auto f = test::forward_cpu(q, true);
    for (int64_t h = 0; h < p.s.heads; ++h) {
      const int64_t lo = h * p.s.n * p.s.d, len = (i + 1) * p.s.d;
      EXPECT_LE(rel_l2(f.o.data() + lo, base.o.data() + lo, len), 1e-6) << "i=" << i << " head " << h;
      for (int64_t j = 0; j <= i; ++j) EXPECT_EQ(f.row_scale[h * p.s.n + j], base.row_scale[h * p.s.n + j]);
    }
  }
}

std::vector<float> random_states(const LinAttnShape& s, uint64_t seed) {
  auto st = test::cast_vector<float>(test::normal_vector(s.heads * s.state_size(), seed));
  for (int64_t h = 0; h < s.heads; ++h) st[h * s.state_size()] = 25.f * st[h * s.state_size()];
  return st;
}

TEST(LinearAttentionProtocol, StateCombineIsAssociativeWithEmptyIdentity) {
  const LinAttnShape s{3, 0, 16, 8, 1};
  const auto x = random_states(s, 1), y = random_states(s, 2), z = random_states(s, 3);
  EXPECT_LE(rel_l2(combined(s, combined(s, x, y), z), combined(s, x, combined(s, y, z))), 1e-6);
  // The value exp(a) S + exp(b) T, checked in float64 at the combined scale.
  const auto xy = combined(s, x, y);
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t o = h * s.state_size();
    const double top = std::max(x[o], y[o]);
    EXPECT_EQ(xy[o], static_cast<float>(top));
    for (int64_t k = 1; k < s.state_size(); ++k)
      EXPECT_NEAR(xy[o + k], std::exp(x[o] - top) * x[o + k] + std::exp(y[o] - top) * y[o + k], 1e-5);
  }
  const auto e = empty_states(s);
  EXPECT_EQ(combined(s, e, x), x);
  EXPECT_EQ(combined(s, x, e), x);
  EXPECT_EQ(combined(s, e, e), e);
  // out may alias an input.
  auto a = x;
  linear_attention_state_combine(ExecContext{}, s.heads, s.m, s.d, a.data(), y.data(), a.data());
  EXPECT_EQ(a, xy);
}

}  // namespace
}  // namespace pf
