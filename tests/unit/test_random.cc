// Philox reproduces its published known-answer vectors; normals have the right
// moments; draws depend only on their keys.
#include <gtest/gtest.h>

#include "runtime/random.h"

namespace pf {
namespace {

TEST(Random, PhiloxKnownAnswers) {
  // Known-answer tests from the Random123 distribution (philox4x32_10).
  Philox4 z = philox4x32(Philox4{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(z.v[0], 0x6627e8d5u);
  EXPECT_EQ(z.v[1], 0xe169c58du);
  EXPECT_EQ(z.v[2], 0xbc57ac4cu);
  EXPECT_EQ(z.v[3], 0x9b00dbd8u);
  Philox4 f = philox4x32(Philox4{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(f.v[0], 0x408f276du);
  EXPECT_EQ(f.v[1], 0x41c83b0eu);
  EXPECT_EQ(f.v[2], 0xa20bc7c6u);
  EXPECT_EQ(f.v[3], 0x6d5451fdu);
}

TEST(Random, NormalMoments) {
  KeyedRandom rng(42, 1, 2);
  const int n = 200000;
  double s1 = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n / 2; ++i) {
    double a, b;
    rng.normal2(i, &a, &b);
    for (double x : {a, b}) {
      s1 += x;
      s2 += x * x;
      s4 += x * x * x * x;
    }
  }
  EXPECT_NEAR(s1 / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NEAR(s4 / n, 3.0, 0.06);
}

TEST(Random, DrawsDependOnlyOnKeys) {
  KeyedRandom a(7, 3, 9), b(7, 3, 9), c(7, 3, 10);
  EXPECT_EQ(a.draw(123).v[2], b.draw(123).v[2]);
  EXPECT_NE(a.draw(123).v[2], c.draw(123).v[2]);
  EXPECT_NE(a.draw(123).v[2], a.draw(124).v[2]);
}

}  // namespace
}  // namespace pf
