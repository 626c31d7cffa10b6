// GELU (tanh approximation) and the residual add: CPU vs float64 reference,
// known values, in-place use, and a finite-difference check of gelu'.
#include <gtest/gtest.h>

#include "kernels/gelu/gelu.h"
#include "kernels/residual/residual.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

TEST(PosopsGelu, CpuMatchesReference) {
  ExecContext ctx;
  uint64_t seed = 31;
  for (int64_t n : {1, 7 * 13, 64 * 100, 70001}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Pair X = random_pair(n, seed, 1, 2.0), dY = random_pair(n, seed, 2);
    ++seed;
    std::vector<float> Y(n), dX(n);
    std::vector<double> Yd(n), dXd(n);
    gelu_forward(ctx, X.f.data(), Y.data(), n);
    gelu_forward_ref(X.d.data(), Yd.data(), n);
    EXPECT_LE(rel_l2(Y, Yd), 1e-5);
    gelu_backward(ctx, dY.f.data(), X.f.data(), dX.data(), n);
    gelu_backward_ref(dY.d.data(), X.d.data(), dXd.data(), n);
    EXPECT_LE(rel_l2(dX, dXd), 1e-5);
    std::vector<float> inplace = X.f;  // Y may alias X
    gelu_forward(ctx, inplace.data(), inplace.data(), n);
    EXPECT_EQ(inplace, Y);
  }
}

TEST(PosopsGelu, KnownValues) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated independently.
  const double x[] = {0.0, 1.0, -1.0, 3.0, -6.0};
  const double want[] = {0.0, 0.8411919906082768, -0.15880800939172324, 2.996362607918227, -8.43964897967453e-11};
  double y[5];
  gelu_forward_ref(x, y, 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], want[i], 1e-14) << "x=" << x[i];
  // fp32 stays finite where x^3 or exp overflow: gelu -> x or 0, gelu' -> 1 or 0.
  ExecContext ctx;
  const std::vector<float> big{-1e20f, -1e4f, -50.f, 50.f, 1e4f, 1e20f}, ones(6, 1.f);
  std::vector<float> yf(6), df(6);
  gelu_forward(ctx, big.data(), yf.data(), 6);
  gelu_backward(ctx, ones.data(), big.data(), df.data(), 6);
  const std::vector<float> want_y{-0.f, -0.f, -0.f, 50.f, 1e4f, 1e20f}, want_d{0.f, 0.f, 0.f, 1.f, 1.f, 1.f};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(yf[i], want_y[i]) << "x=" << big[i];
    EXPECT_EQ(df[i], want_d[i]) << "x=" << big[i];
  }
}

TEST(PosopsGelu, ReferenceBackwardMatchesFiniteDifferences) {
  const int64_t n = 97;
  Pair X = random_pair(n, 7, 1, 2.5), R = random_pair(n, 7, 2);
  std::vector<double> Y(n), dX(n);
  auto loss = [&] {
    gelu_forward_ref(X.d.data(), Y.data(), n);
    return test::dot(Y, R.d);
  };
  gelu_backward_ref(R.d.data(), X.d.data(), dX.data(), n);
  EXPECT_LE(test::fd_gradient_error(X.d, dX, loss, n), 1e-6);
}

TEST(PosopsResidual, CpuMatchesReferenceInPlace) {
  ExecContext ctx;
  const int64_t n = 7 * 100;
  Pair a = random_pair(n, 8, 1), b = random_pair(n, 8, 2);
  std::vector<double> want(n);
  residual_add_ref(a.d.data(), b.d.data(), want.data(), n);
  residual_add(ctx, a.f.data(), b.f.data(), a.f.data(), n);  // a += b
  EXPECT_LE(rel_l2(a.f, want), 1e-7);
}

}  // namespace
}  // namespace pf
