// Optimizer pieces: AdamW against a hand-computed two-step example and against
// the float64 reference over several steps (with and without decay, with a
// clipping scale); the sum of squares behind the global gradient norm, the
// clipping coefficient and in-place scaling; the learning-rate schedule.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/lr_schedule.h"
#include "kernels/reduce/reduce.h"
#include "runtime/errors.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

TEST(PosopsAdamW, HandComputedTwoSteps) {
  // Hyper-parameters exactly representable in fp32: lr 1/8, betas (7/8, 1 - 2^-10),
  // eps 2^-27, decay 1/16; p = 1, grads 0.5 then -0.25.
  // Step 1: m = 1/8 * 0.5 = 0.0625, v = 2^-10 * 0.25, mhat = 0.5, vhat = 0.25,
  //         p = 1 - 1/8 (0.5 / (0.5 + 2^-27) + 1/16) = 0.8671875018626451.
  // Step 2: m = 7/8 * 0.0625 - 1/8 * 0.25 = 0.0234375, mhat = m / (1 - 49/64) = 0.1,
  //         v = (1 - 2^-10) 2^-12 + 2^-10 / 16, vhat = v / (1 - (1 - 2^-10)^2) = 0.15620420127015144,
  //         p = p1 - 1/8 (0.1 / (sqrt(vhat) + 2^-27) + p1 / 16) = 0.8287851879742018.
  AdamWConfig cfg;
  cfg.lr = 0.125f;
  cfg.beta1 = 0.875f;
  cfg.beta2 = 1.f - 1.f / 1024.f;
  cfg.eps = 1.f / 134217728.f;
  cfg.weight_decay = 0.0625f;
  double pd = 1.0, md = 0.0, vd = 0.0;
  float pf = 1.f, mf = 0.f, vf = 0.f;
  ExecContext ctx;
  const double g1 = 0.5, g2 = -0.25;
  const float g1f = 0.5f, g2f = -0.25f;
  adamw_update_ref(&pd, &g1, &md, &vd, 1, 1, cfg, 1.0);
  adamw_update(ctx, &pf, &g1f, &mf, &vf, 1, 1, cfg);
  EXPECT_DOUBLE_EQ(md, 0.0625);
  EXPECT_DOUBLE_EQ(vd, 0.25 / 1024);
  EXPECT_NEAR(pd, 0.8671875018626451, 1e-15);
  EXPECT_NEAR(pf, 0.8671875018626451, 1e-7);
  adamw_update_ref(&pd, &g2, &md, &vd, 1, 2, cfg, 1.0);
  adamw_update(ctx, &pf, &g2f, &mf, &vf, 1, 2, cfg);
  EXPECT_DOUBLE_EQ(md, 0.0234375);
  EXPECT_NEAR(vd, 0.00030493736267089844, 1e-18);
  EXPECT_NEAR(pd, 0.8287851879742018, 1e-15);
  EXPECT_NEAR(pf, 0.8287851879742018, 1e-6);
  EXPECT_NEAR(mf, 0.0234375, 1e-9);
}

TEST(PosopsAdamW, CpuMatchesReferenceOverSteps) {
  ExecContext ctx;
  for (float decay : {0.f, 0.1f})
    for (int64_t n : {1, 7, 1000, 70001}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " decay=" << decay);
      AdamWConfig cfg;
      cfg.lr = 1e-2f;
      cfg.beta2 = 0.95f;
      cfg.weight_decay = decay;
      Pair p = random_pair(n, 61, 1), m = random_pair(n, 61, 2, 0.01), v = random_pair(n, 61, 3, 0.0);
      for (int64_t step = 1; step <= 3; ++step) {
        Pair g = random_pair(n, 61, 10 + step);
        const float scale = step == 2 ? 0.5f : 1.f;
        adamw_update(ctx, p.f.data(), g.f.data(), m.f.data(), v.f.data(), n, step, cfg, scale);
        adamw_update_ref(p.d.data(), g.d.data(), m.d.data(), v.d.data(), n, step, cfg, scale);
      }
      EXPECT_LE(rel_l2(p.f, p.d), 1e-5);
      EXPECT_LE(rel_l2(m.f, m.d), 1e-5);
      EXPECT_LE(rel_l2(v.f, v.d), 1e-5);
    }
  float p = 0, g = 0, m = 0, v = 0;
  EXPECT_THROW(adamw_update(ctx, &p, &g, &m, &v, 1, 0, AdamWConfig{}), ValueError);  // steps are 1-based
}

TEST(PosopsGradNorm, SumOfSquaresAndClipping) {
  ExecContext ctx;
  for (int64_t n : {1, 7, 100000}) {
    const Pair x = random_pair(n, 62, n);
    const double want = sum_of_squares_ref(x.d.data(), n);
    EXPECT_NEAR(sum_of_squares(ctx, x.f.data(), n), want, 1e-12 * want) << "n=" << n;
  }
  EXPECT_EQ(sum_of_squares(ctx, nullptr, 0), 0.0);
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(5.0, 0.0), 1.0);  // clipping disabled
  EXPECT_NEAR(clip_coefficient(4.0, 1.0), 0.25, 1e-6);
  // Scaling by the coefficient brings the norm to max_norm.
  Pair g = random_pair(1000, 63, 1, 3.0);
  const double norm = std::sqrt(sum_of_squares(ctx, g.f.data(), 1000));
  scale_values(ctx, g.f.data(), 1000, static_cast<float>(clip_coefficient(norm, 1.0)));
  EXPECT_NEAR(std::sqrt(sum_of_squares(ctx, g.f.data(), 1000)), 1.0, 1e-5);
}

TEST(PosopsLrSchedule, WarmupCosineFloor) {
  const LrSchedule s{1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 0), 1e-4);  // warmup start: max / warmup
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 4), 5e-4);
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 9), 1e-3);   // warmup end
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 10), 1e-3);  // decay start
  EXPECT_NEAR(learning_rate_at(s, 60), 5.5e-4, 1e-15);  // mid-cosine: (max + min) / 2
  EXPECT_NEAR(learning_rate_at(s, 35), 1e-4 + 9e-4 * 0.5 * (1 + std::sqrt(0.5)), 1e-15);  // a quarter in
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 110), 1e-4);  // floor
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 100000), 1e-4);
  for (int64_t step = 10; step < 110; ++step) EXPECT_LT(learning_rate_at(s, step + 1), learning_rate_at(s, step));
  EXPECT_DOUBLE_EQ(learning_rate_at(LrSchedule{1e-3, 0.0, 0, 100}, 0), 1e-3);  // no warmup
  EXPECT_THROW(learning_rate_at(LrSchedule{1e-3, 0.0, 20, 10}, 0), ConfigError);
}

}  // namespace
}  // namespace pf
