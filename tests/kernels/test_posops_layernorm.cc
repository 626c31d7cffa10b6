// Layer norm: CPU vs float64 reference (Y, mean, rstd; dX, accumulated dgamma
// and dbeta) on rows with a non-zero mean, and a finite-difference check of
// the reference backward.
#include <gtest/gtest.h>

#include "kernels/layernorm/layernorm.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

TEST(PosopsLayerNorm, CpuMatchesReference) {
  ExecContext ctx;
  uint64_t seed = 21;
  for (int64_t T : {1, 7, 64, 600})  // 600 > 256: several row chunks in the parameter gradients
    for (int64_t C : {13, 100, 256}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " C=" << C);
      Pair X = random_pair(T * C, seed, 1, 2.0, 3.0), g = random_pair(C, seed, 2, 0.1, 1.0),
           b = random_pair(C, seed, 3), dY = random_pair(T * C, seed, 4);
      Pair dg = random_pair(C, seed, 5), db = random_pair(C, seed, 6);
      ++seed;
      std::vector<float> Y(T * C), mean(T), rstd(T), dX(T * C);
      std::vector<double> Yd(T * C), meand(T), rstdd(T), dXd(T * C);
      layernorm_forward(ctx, X.f.data(), g.f.data(), b.f.data(), Y.data(), mean.data(), rstd.data(), T, C);
      layernorm_forward_ref(X.d.data(), g.d.data(), b.d.data(), Yd.data(), meand.data(), rstdd.data(), T, C, 1e-5);
      EXPECT_LE(rel_l2(Y, Yd), 1e-5);
      EXPECT_LE(rel_l2(mean, meand), 1e-5);
      EXPECT_LE(rel_l2(rstd, rstdd), 1e-5);
      layernorm_backward(ctx, dY.f.data(), X.f.data(), g.f.data(), mean.data(), rstd.data(), dX.data(), dg.f.data(),
                         db.f.data(), T, C);
      layernorm_backward_ref(dY.d.data(), X.d.data(), g.d.data(), meand.data(), rstdd.data(), dXd.data(), dg.d.data(),
                             db.d.data(), T, C);
      EXPECT_LE(rel_l2(dX, dXd), 1e-5);
      EXPECT_LE(rel_l2(dg.f, dg.d), 1e-5);
      EXPECT_LE(rel_l2(db.f, db.d), 1e-5);
    }
}

TEST(PosopsLayerNorm, ReferenceBackwardMatchesFiniteDifferences) {
  const int64_t T = 7, C = 13;
  Pair X = random_pair(T * C, 6, 1, 1.5, 0.5), g = random_pair(C, 6, 2, 0.3, 1.0), b = random_pair(C, 6, 3),
       R = random_pair(T * C, 6, 4);
  std::vector<double> Y(T * C), mean(T), rstd(T);
  auto loss = [&] {
    layernorm_forward_ref(X.d.data(), g.d.data(), b.d.data(), Y.data(), mean.data(), rstd.data(), T, C, 1e-5);
    return test::dot(Y, R.d);
  };
  loss();
  std::vector<double> dX(T * C), dg(C, 0.0), db(C, 0.0);
  layernorm_backward_ref(R.d.data(), X.d.data(), g.d.data(), mean.data(), rstd.data(), dX.data(), dg.data(), db.data(),
                         T, C);
  EXPECT_LE(test::fd_gradient_error(X.d, dX, loss), 1e-6);
  EXPECT_LE(test::fd_gradient_error(g.d, dg, loss), 1e-6);
  EXPECT_LE(test::fd_gradient_error(b.d, db, loss), 1e-6);
}

}  // namespace
}  // namespace pf
