// Mixed-precision building blocks on the CPU: fp32 <-> f16/bf16 conversions
// against the float64 rounding reference (ties, subnormals, overflow, NaN),
// and the linear layer with 16-bit operands against the float64 reference run
// on the rounded operands (forward, backward with accumulation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "kernels/cast/cast.h"
#include "kernels/linear/linear.h"
#include "runtime/errors.h"
#include "runtime/memory.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

std::vector<float> round_trip(const ExecContext& ctx, DType t, const std::vector<float>& x) {
  std::vector<uint16_t> words(x.size());
  std::vector<float> back(x.size());
  cast_narrow_cpu(ctx, t, x.data(), words.data(), static_cast<int64_t>(x.size()));
  cast_widen_cpu(ctx, t, words.data(), back.data(), static_cast<int64_t>(x.size()));
  synchronize(ctx.stream);
  return back;
}

std::vector<double> rounded_ref(DType t, const std::vector<double>& x) {
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = round_to_storage_ref(static_cast<double>(static_cast<float>(x[i])), t);
  return r;
}

TEST(PosopsCast, RoundsLikeTheReference) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.f, -0.f, 1.f, -1.f, inf, -inf, 65504.f, 65519.f, 65520.f, -70000.f, 1e-8f, 6e-8f,
                          3e-5f, 1.f + 1.f / 256, 1.f + 3.f / 512, 1.f + 1.f / 2048, 1.f + 3.f / 4096,
                          3.39e38f, 3.4e38f, 1e-39f, 1e-45f, 2.5f, 3.5f};
  const Pair r = random_pair(4000, 5, 1);
  for (size_t i = 0; i < r.f.size(); ++i) x.push_back(r.f[i] * std::pow(10.f, static_cast<float>(i % 20) - 10.f));
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<float> got = round_trip(ctx, t, x);
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = round_to_storage_ref(x[i], t);
      if (!(static_cast<double>(got[i]) == want) && bad++ < 5) ADD_FAILURE() << x[i] << " -> " << got[i] << ", want " << want;
    }
    EXPECT_EQ(bad, 0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(round_trip(ctx, t, {nan})[0]));
  }
  // Spot values of the formats themselves.
  EXPECT_EQ(round_trip(ctx, DType::f16, {65520.f})[0], inf);
  EXPECT_EQ(round_trip(ctx, DType::f16, {65519.f})[0], 65504.f);
  EXPECT_EQ(round_trip(ctx, DType::bf16, {1.f + 1.f / 256})[0], 1.f);              // tie to even
  EXPECT_EQ(round_trip(ctx, DType::bf16, {1.f + 3.f / 256})[0], 1.f + 4.f / 256);  // tie to even (up)
  EXPECT_EQ(round_trip(ctx, DType::f16, {1e-8f})[0], 0.f);                         // below half the smallest subnormal
}

TEST(PosopsLinearLowp, MatchesTheReferenceOnRoundedOperands) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 21;
  for (DType t : {DType::f16, DType::bf16})
    for (auto [T, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 13, 7}, {64, 100, 13}, {300, 32, 96}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " T=" << T << " in=" << in << " out=" << out);
      Pair X = random_pair(T * in, seed, 1), W = random_pair(out * in, seed, 2, 0.2), b = random_pair(out, seed, 3),
           dY = random_pair(T * out, seed, 4, 1e-3);
      Pair dW = random_pair(out * in, seed, 5), db = random_pair(out, seed, 6);
      ++seed;
      std::vector<uint16_t> X16(X.f.size()), W16(W.f.size());
      cast_narrow(ctx, t, X.f.data(), X16.data(), T * in);
      cast_narrow(ctx, t, W.f.data(), W16.data(), out * in);
      const std::vector<double> Xr = rounded_ref(t, X.d), Wr = rounded_ref(t, W.d), dYr = rounded_ref(t, dY.d);

      std::vector<float> Y(T * out), dX(T * in);
      std::vector<double> Yd(Y.size()), dXd(dX.size());
      linear_forward_lowp(ctx, t, X16.data(), W16.data(), b.f.data(), Y.data(), T, in, out);
      linear_forward_ref(Xr.data(), Wr.data(), b.d.data(), Yd.data(), T, in, out);
      synchronize(ctx.stream);
      EXPECT_LE(rel_l2(Y, Yd), 1e-6);
      linear_backward_lowp(ctx, t, dY.f.data(), X16.data(), W16.data(), dX.data(), dW.f.data(), db.f.data(), T, in,
                           out);
      linear_backward_ref(dYr.data(), Xr.data(), Wr.data(), dXd.data(), dW.d.data(), db.d.data(), T, in, out);
      synchronize(ctx.stream);
      EXPECT_LE(rel_l2(dX, dXd), 1e-6);
      EXPECT_LE(rel_l2(dW.f, dW.d), 1e-6);
      EXPECT_LE(rel_l2(db.f, db.d), 1e-6);
    }
}

TEST(PosopsLinearLowp, RefusesOtherStorage) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  float x = 1.f, y = 0.f;
  EXPECT_THROW(linear_forward_lowp(res.ctx(), DType::f32, &x, &x, nullptr, &y, 1, 1, 1), ValueError);
  EXPECT_THROW(cast_narrow(res.ctx(), DType::i32, &x, &y, 1), ValueError);
}

}  // namespace
}  // namespace pf
