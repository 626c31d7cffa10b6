// exp_f32 (runtime/vector_math.h) against the float64 exponential over its
// whole finite range, and its edges: overflow to +inf above 88, 0 below
// -87.33, NaN propagated.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/vector_math.h"

namespace pf {
namespace {

TEST(VectorMath, Fp32ExponentialMatchesFloat64) {
  double worst = 0;
  for (int k = 0; k <= 2000000; ++k) {
    const float v = -87.3f + (88.0f + 87.3f) * static_cast<float>(k) / 2000000.f;
    const double want = std::exp(static_cast<double>(v));
    worst = std::max(worst, std::fabs(exp_f32(v) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(exp_f32(0.f), 1.f);
  EXPECT_EQ(exp_f32(-88.f), 0.f);
  EXPECT_EQ(exp_f32(-INFINITY), 0.f);
  EXPECT_EQ(exp_f32(88.5f), INFINITY);
  EXPECT_EQ(exp_f32(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
}

}  // namespace
}  // namespace pf
