// The per-head gated mix of the windowed hybrid attention: CPU vs float64
// reference (out, da, db, dgate accumulated) over shapes and gates from -30
// to 30, in-place use, a finite-difference check of the reference backward
// (gate included), and dgate independent of the thread count, bit for bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/gated_mix/gated_mix.h"
#include "kernels/gated_mix/gated_mix_math.h"
#include "runtime/errors.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

struct MixCase {
  GatedMixShape s;
  Pair gate, a, b, dout;
};

MixCase make_case(GatedMixShape s, uint64_t seed, double gate_scale) {
  return {s, random_pair(s.heads, seed, 1, gate_scale), random_pair(s.total(), seed, 2),
          random_pair(s.total(), seed, 3), random_pair(s.total(), seed, 4)};
}

TEST(PosopsGatedMix, CpuMatchesReference) {
  ExecContext ctx;
  uint64_t seed = 90;
  for (GatedMixShape s : {GatedMixShape{1, 1, 1, 1}, GatedMixShape{2, 4, 7, 8}, GatedMixShape{3, 4, 300, 32},
                          GatedMixShape{1, 8, 4099, 16}})
    for (double gate_scale : {0.5, 4.0, 30.0}) {
      SCOPED_TRACE(testing::Message() << "batch=" << s.batch << " heads=" << s.heads << " n=" << s.n << " d=" << s.d
                                      << " gate scale " << gate_scale);
      const MixCase c = make_case(s, ++seed, gate_scale);
      const int64_t N = s.total();
      std::vector<float> out(N), da(N), db(N), dgate(s.heads, 0.25f);
      std::vector<double> out_r(N), da_r(N), db_r(N), dgate_r(s.heads, 0.25);
      gated_mix_forward(ctx, s, c.gate.f.data(), c.a.f.data(), c.b.f.data(), out.data());
      gated_mix_backward(ctx, s, c.gate.f.data(), c.a.f.data(), c.b.f.data(), c.dout.f.data(), da.data(), db.data(),
                         dgate.data());
      gated_mix_forward_ref(s, c.gate.d.data(), c.a.d.data(), c.b.d.data(), out_r.data());
      gated_mix_backward_ref(s, c.gate.d.data(), c.a.d.data(), c.b.d.data(), c.dout.d.data(), da_r.data(), db_r.data(),
                             dgate_r.data());
      // Relative to the inputs' size: a + s (b - a) may cancel to near 0.
      std::vector<double> diff(N);
      for (int64_t i = 0; i < N; ++i) diff[i] = out[i] - out_r[i];
      EXPECT_LE(test::l2_norm(diff) / (test::l2_norm(c.a.d) + test::l2_norm(c.b.d)), 1e-6);
      EXPECT_LE(rel_l2(da, da_r), 1e-6);
      EXPECT_LE(rel_l2(db, db_r), 1e-6);
      for (int64_t h = 0; h < s.heads; ++h)  // 0.25 was there before: accumulated
        EXPECT_NEAR(dgate[h], dgate_r[h], 1e-5 * (1.0 + std::abs(dgate_r[h]))) << "head " << h;
      std::vector<float> inplace = c.a.f;  // out may alias a
      gated_mix_forward(ctx, s, c.gate.f.data(), inplace.data(), c.b.f.data(), inplace.data());
      EXPECT_EQ(inplace, out);
    }
}

TEST(PosopsGatedMix, SigmoidIsStableAtBothEnds) {
  EXPECT_EQ(gated_mix_sigmoid(0.f), 0.5f);
  EXPECT_EQ(gated_mix_sigmoid(200.f), 1.f);
  EXPECT_GT(gated_mix_sigmoid(-80.f), 0.f);  // exp(-80) ~ 1.8e-35: not flushed to 0
  EXPECT_NEAR(gated_mix_sigmoid(-80.f) / std::exp(-80.0), 1.0, 1e-5);
  EXPECT_NEAR(gated_mix_sigmoid(1.5f), 1.0 / (1.0 + std::exp(-1.5)), 1e-7);
}

// L = sum(out * G): the reference's da, db and dgate against central differences.
TEST(PosopsGatedMix, ReferenceBackwardMatchesFiniteDifferences) {
  const GatedMixShape s{2, 3, 5, 4};
  MixCase c = make_case(s, 7, 1.5);
  const int64_t N = s.total();
  std::vector<double> da(N), db(N), dgate(s.heads, 0.0);
  gated_mix_backward_ref(s, c.gate.d.data(), c.a.d.data(), c.b.d.data(), c.dout.d.data(), da.data(), db.data(),
                         dgate.data());
  auto loss = [&] {
    std::vector<double> out(N);
    gated_mix_forward_ref(s, c.gate.d.data(), c.a.d.data(), c.b.d.data(), out.data());
    double L = 0;
    for (int64_t i = 0; i < N; ++i) L += out[i] * c.dout.d[i];
    return L;
  };
  EXPECT_LE(test::fd_gradient_error(c.a.d, da, loss), 1e-7);
  EXPECT_LE(test::fd_gradient_error(c.b.d, db, loss), 1e-7);
  EXPECT_LE(test::fd_gradient_error(c.gate.d, dgate, loss), 1e-7);
}

TEST(PosopsGatedMix, GateGradientDoesNotDependOnThreads) {
  const GatedMixShape s{4, 4, 5000, 8};
  const MixCase c = make_case(s, 11, 2.0);
  const int64_t N = s.total();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    ExecContext ctx;
    std::vector<float> da(N), db(N), dgate(s.heads, 0.f);
    gated_mix_backward(ctx, s, c.gate.f.data(), c.a.f.data(), c.b.f.data(), c.dout.f.data(), da.data(), db.data(),
                       dgate.data());
    results.push_back(dgate);
  }
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(PosopsGatedMix, BadShapesAndAliasedGradientsAreRefused) {
  ExecContext ctx;
  float x = 0;
  EXPECT_THROW(gated_mix_forward(ctx, GatedMixShape{1, 0, 1, 1}, &x, &x, &x, &x), ValueError);
  EXPECT_THROW(gated_mix_backward(ctx, GatedMixShape{1, 1, 1, 1}, &x, &x, &x, &x, &x, &x, &x), ValueError);
}

}  // namespace
}  // namespace pf
