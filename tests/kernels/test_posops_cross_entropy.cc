// Softmax cross-entropy: CPU vs float64 reference (per-token losses, sums,
// counts, top-1 correct counts, gradients) for V = 30 and V = 1000 with
// ignored targets; huge logits stay finite; in-place backward; a
// finite-difference check of the reference backward.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cross_entropy/cross_entropy.h"
#include "runtime/errors.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

// Random targets in [0, V) with every third token (from `offset`) ignored.
std::vector<int32_t> targets_with_ignored(int64_t T, int64_t V, uint64_t seed, int64_t offset) {
  std::vector<int32_t> y = test::random_ids(T, V, seed, 7);
  for (int64_t t = offset; t < T; t += 3) y[t] = -1;
  return y;
}

void compare_with_reference(const Pair& logits, const std::vector<int32_t>& y, int64_t T, int64_t V) {
  ExecContext ctx;
  std::vector<float> losses(T, -1.f), dl(T * V);
  std::vector<double> lossesd(T), dld(T * V);
  const CrossEntropySums got = cross_entropy_forward(ctx, logits.f.data(), y.data(), losses.data(), T, V);
  const CrossEntropySums want = cross_entropy_forward_ref(logits.d.data(), y.data(), lossesd.data(), T, V);
  EXPECT_LE(rel_l2(losses, lossesd), 1e-5);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::fabs(want.loss_sum) + 1e-12);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.correct, want.correct);
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_TRUE(std::isfinite(losses[t])) << "token " << t;
    if (y[t] == -1) {
      EXPECT_EQ(losses[t], 0.f) << "ignored token " << t;
    }
  }
  const double scale = want.count > 0 ? 1.0 / static_cast<double>(want.count) : 0.0;
  cross_entropy_backward(ctx, logits.f.data(), y.data(), dl.data(), T, V, static_cast<float>(scale));
  cross_entropy_backward_ref(logits.d.data(), y.data(), dld.data(), T, V, scale);
  EXPECT_LE(rel_l2(dl, dld), 1e-5);
  for (int64_t i = 0; i < T * V; ++i) ASSERT_TRUE(std::isfinite(dl[i])) << "dlogits[" << i << "]";
}

TEST(PosopsCrossEntropy, CpuMatchesReferenceWithIgnoredTargets) {
  uint64_t seed = 51;
  for (int64_t V : {30, 1000})
    for (int64_t T : {1, 7, 64}) {
      SCOPED_TRACE(testing::Message() << "V=" << V << " T=" << T);
      const Pair logits = random_pair(T * V, seed, 1, 3.0);
      const std::vector<int32_t> y = targets_with_ignored(T, V, seed, T == 1 ? 1 : 2);
      ++seed;
      compare_with_reference(logits, y, T, V);
    }
}

TEST(PosopsCrossEntropy, HugeLogitsStayFinite) {
  const int64_t T = 7, V = 30;
  Pair logits = random_pair(T * V, 52, 1, 1e4);
  for (int64_t j = 0; j < V; ++j) {  // a row spanning nearly the whole fp32 range
    logits.f[2 * V + j] = (j % 2 ? 1e37f : -1e37f);
    logits.d[2 * V + j] = logits.f[2 * V + j];
  }
  const std::vector<int32_t> y = targets_with_ignored(T, V, 52, 5);
  compare_with_reference(logits, y, T, V);
}

TEST(PosopsCrossEntropy, CountsAndTopOneAccuracy) {
  ExecContext ctx;
  const int64_t T = 4, V = 3;
  const std::vector<float> logits{2, 0, 0,   // argmax 0
                                  0, 5, 1,   // argmax 1
                                  1, 1, 0,   // tie: first index, 0
                                  0, 0, 9};  // ignored
  const std::vector<int32_t> y{0, 2, 0, -1};
  std::vector<float> losses(T);
  const CrossEntropySums s = cross_entropy_forward(ctx, logits.data(), y.data(), losses.data(), T, V);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.correct, 2);
  const double l0 = std::log(std::exp(2.0) + 2.0) - 2.0, l1 = std::log(1 + std::exp(5.0) + std::exp(1.0)) - 1.0,
               l2 = std::log(2 * std::exp(1.0) + 1.0) - 1.0;
  EXPECT_NEAR(s.loss_sum, l0 + l1 + l2, 1e-5);
  EXPECT_EQ(losses[3], 0.f);
}

TEST(PosopsCrossEntropy, BackwardInPlaceAndRejectsBadTargets) {
  ExecContext ctx;
  const int64_t T = 7, V = 30;
  const Pair logits = random_pair(T * V, 53, 1, 2.0);
  const std::vector<int32_t> y = targets_with_ignored(T, V, 53, 0);
  std::vector<float> separate(T * V), inplace = logits.f;
  cross_entropy_backward(ctx, logits.f.data(), y.data(), separate.data(), T, V, 0.25f);
  cross_entropy_backward(ctx, inplace.data(), y.data(), inplace.data(), T, V, 0.25f);
  EXPECT_EQ(separate, inplace);
  const std::vector<int32_t> bad{0, 30, 1, 2, 3, 4, 5};
  std::vector<float> losses(T);
  EXPECT_THROW(cross_entropy_forward(ctx, logits.f.data(), bad.data(), losses.data(), T, V), ValueError);
}

TEST(PosopsCrossEntropy, ReferenceBackwardMatchesFiniteDifferences) {
  const int64_t T = 7, V = 30;
  Pair logits = random_pair(T * V, 54, 1, 2.0);
  const std::vector<int32_t> y = targets_with_ignored(T, V, 54, 1);
  std::vector<double> losses(T), dl(T * V);
  const double scale = 0.2;
  auto loss = [&] { return scale * cross_entropy_forward_ref(logits.d.data(), y.data(), losses.data(), T, V).loss_sum; };
  cross_entropy_backward_ref(logits.d.data(), y.data(), dl.data(), T, V, scale);
  EXPECT_LE(test::fd_gradient_error(logits.d, dl, loss, T * V), 1e-6);
}

}  // namespace
}  // namespace pf
