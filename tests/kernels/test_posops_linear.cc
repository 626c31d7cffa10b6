// Linear layer (Y = X W^T + b): CPU vs float64 reference for forward and
// backward (with gradient accumulation into non-zero dW, db), finite-difference
// check of the reference backward, and the optional bias / dX.
#include <gtest/gtest.h>

#include "kernels/linear/linear.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

struct Shape { int64_t T, in, out; };
const Shape kShapes[] = {{1, 13, 7}, {7, 30, 100}, {64, 100, 13}, {33, 64, 96}, {600, 30, 100}};  // T > 256: several row chunks

TEST(PosopsLinear, CpuMatchesReference) {
  ExecContext ctx;
  uint64_t seed = 11;
  for (const Shape& s : kShapes)
    for (bool bias : {true, false}) {
      SCOPED_TRACE(testing::Message() << "T=" << s.T << " in=" << s.in << " out=" << s.out << " bias=" << bias);
      Pair X = random_pair(s.T * s.in, seed, 1), W = random_pair(s.out * s.in, seed, 2, 0.2),
           b = random_pair(s.out, seed, 3), dY = random_pair(s.T * s.out, seed, 4);
      Pair dW = random_pair(s.out * s.in, seed, 5), db = random_pair(s.out, seed, 6);  // accumulated into
      ++seed;
      std::vector<float> Y(s.T * s.out), dX(s.T * s.in);
      std::vector<double> Yd(Y.size()), dXd(dX.size());
      linear_forward(ctx, X.f.data(), W.f.data(), bias ? b.f.data() : nullptr, Y.data(), s.T, s.in, s.out);
      linear_forward_ref(X.d.data(), W.d.data(), bias ? b.d.data() : nullptr, Yd.data(), s.T, s.in, s.out);
      EXPECT_LE(rel_l2(Y, Yd), 1e-5);
      linear_backward(ctx, dY.f.data(), X.f.data(), W.f.data(), dX.data(), dW.f.data(), bias ? db.f.data() : nullptr,
                      s.T, s.in, s.out);
      linear_backward_ref(dY.d.data(), X.d.data(), W.d.data(), dXd.data(), dW.d.data(), bias ? db.d.data() : nullptr,
                          s.T, s.in, s.out);
      EXPECT_LE(rel_l2(dX, dXd), 1e-5);
      EXPECT_LE(rel_l2(dW.f, dW.d), 1e-5);
      EXPECT_LE(rel_l2(db.f, db.d), 1e-5);
    }
}

TEST(PosopsLinear, NullDxLeavesOtherGradients) {
  ExecContext ctx;
  const Shape s{5, 9, 11};
  Pair X = random_pair(s.T * s.in, 3, 1), W = random_pair(s.out * s.in, 3, 2), dY = random_pair(s.T * s.out, 3, 4);
  std::vector<float> dW(s.out * s.in, 0.f), db(s.out, 0.f);
  std::vector<double> dWd(dW.size(), 0.0), dbd(db.size(), 0.0), dXd(s.T * s.in);
  linear_backward(ctx, dY.f.data(), X.f.data(), W.f.data(), nullptr, dW.data(), db.data(), s.T, s.in, s.out);
  linear_backward_ref(dY.d.data(), X.d.data(), W.d.data(), dXd.data(), dWd.data(), dbd.data(), s.T, s.in, s.out);
  EXPECT_LE(rel_l2(dW, dWd), 1e-5);
  EXPECT_LE(rel_l2(db, dbd), 1e-5);
}

TEST(PosopsLinear, ReferenceBackwardMatchesFiniteDifferences) {
  const Shape s{7, 13, 5};
  Pair X = random_pair(s.T * s.in, 5, 1), W = random_pair(s.out * s.in, 5, 2), b = random_pair(s.out, 5, 3),
       R = random_pair(s.T * s.out, 5, 4);
  std::vector<double> Y(s.T * s.out);
  auto loss = [&] {
    linear_forward_ref(X.d.data(), W.d.data(), b.d.data(), Y.data(), s.T, s.in, s.out);
    return test::dot(Y, R.d);
  };
  std::vector<double> dX(X.d.size()), dW(W.d.size(), 0.0), db(b.d.size(), 0.0);
  linear_backward_ref(R.d.data(), X.d.data(), W.d.data(), dX.data(), dW.data(), db.data(), s.T, s.in, s.out);
  EXPECT_LE(test::fd_gradient_error(X.d, dX, loss), 1e-7);
  EXPECT_LE(test::fd_gradient_error(W.d, dW, loss), 1e-7);
  EXPECT_LE(test::fd_gradient_error(b.d, db, loss), 1e-7);
}

}  // namespace
}  // namespace pf
