// Embedding: CPU vs float64 reference for the lookup and the scatter-add
// backward (protein and larger vocabularies, many repeated ids, accumulation
// into a non-zero dTable), a hand-checked repeated-id case, id validation,
// and a finite-difference check of the reference backward.
#include <gtest/gtest.h>

#include "kernels/embedding/embedding.h"
#include "runtime/errors.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

TEST(PosopsEmbedding, CpuMatchesReference) {
  ExecContext ctx;
  uint64_t seed = 41;
  for (int64_t V : {30, 1000})
    for (int64_t T : {1, 7, 500})
      for (int64_t C : {13, 100}) {
        SCOPED_TRACE(testing::Message() << "V=" << V << " T=" << T << " C=" << C);
        const std::vector<int32_t> ids = test::random_ids(T, V, seed, 1);
        Pair table = random_pair(V * C, seed, 2), dY = random_pair(T * C, seed, 3), dT = random_pair(V * C, seed, 4);
        ++seed;
        std::vector<float> Y(T * C);
        std::vector<double> Yd(T * C);
        embedding_forward(ctx, ids.data(), table.f.data(), Y.data(), T, V, C);
        embedding_forward_ref(ids.data(), table.d.data(), Yd.data(), T, V, C);
        EXPECT_EQ(rel_l2(Y, Yd), 0.0);  // a copy
        embedding_backward(ctx, ids.data(), dY.f.data(), dT.f.data(), T, V, C);
        embedding_backward_ref(ids.data(), dY.d.data(), dT.d.data(), T, V, C);
        EXPECT_LE(rel_l2(dT.f, dT.d), 1e-5);
      }
}

TEST(PosopsEmbedding, BackwardSumsRepeatedIds) {
  ExecContext ctx;
  const int64_t V = 4, C = 3, T = 6;
  const std::vector<int32_t> ids{2, 0, 2, 2, 3, 0};
  std::vector<float> dY(T * C), dTable(V * C, 1.f);
  for (int64_t i = 0; i < T * C; ++i) dY[i] = static_cast<float>(i);  // dY[t, c] = 3 t + c
  embedding_backward(ctx, ids.data(), dY.data(), dTable.data(), T, V, C);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(dTable[0 * C + c], 1.f + (3 + c) + (15 + c));            // tokens 1, 5
    EXPECT_EQ(dTable[1 * C + c], 1.f);                                 // unused id
    EXPECT_EQ(dTable[2 * C + c], 1.f + (0 + c) + (6 + c) + (9 + c));  // tokens 0, 2, 3
    EXPECT_EQ(dTable[3 * C + c], 1.f + (12 + c));                      // token 4
  }
}

TEST(PosopsEmbedding, RejectsOutOfRangeIds) {
  ExecContext ctx;
  const std::vector<int32_t> ids{0, 30};
  std::vector<float> table(30 * 2), Y(2 * 2);
  EXPECT_THROW(embedding_forward(ctx, ids.data(), table.data(), Y.data(), 2, 30, 2), ValueError);
  const std::vector<int32_t> neg{-1};
  EXPECT_THROW(embedding_backward(ctx, neg.data(), Y.data(), table.data(), 1, 30, 2), ValueError);
}

TEST(PosopsEmbedding, ReferenceBackwardMatchesFiniteDifferences) {
  const int64_t V = 30, T = 40, C = 5;
  const std::vector<int32_t> ids = test::random_ids(T, V, 9, 1);
  Pair table = random_pair(V * C, 9, 2), R = random_pair(T * C, 9, 3);
  std::vector<double> Y(T * C), dT(V * C, 0.0);
  auto loss = [&] {
    embedding_forward_ref(ids.data(), table.d.data(), Y.data(), T, V, C);
    return test::dot(Y, R.d);
  };
  embedding_backward_ref(ids.data(), R.d.data(), dT.data(), T, V, C);
  EXPECT_LE(test::fd_gradient_error(table.d, dT, loss, V * C), 1e-7);
}

}  // namespace
}  // namespace pf
