// The CUDA column sums of the backward (kernels/reduce/column_sums_cuda.cuh:
// the linear bias gradient and LayerNorm's parameter gradients) and the CUDA
// embedding backward after its sort (kernels/embedding/embedding_backward_cuda.cuh)
// run on the CPU under the block emulator (tests/support/cuda_block_emulator.h):
// the kernel code and launch order the GPU runs, with scratch that starts as
// NaN, against the float64 reference and the CPU kernels. Shapes: single rows
// and columns, T just below and above a chunk, column counts that leave a
// partial tile, one id for every token (a run through every piece), ids out
// of range, and the planner's longest local length of the paper preset
// (284,672 tokens of width 512).
#include "tests/kernels/column_sums_emulation.h"
// First: the emulator defines the CUDA keywords the kernels use.

#include <gtest/gtest.h>

#include <vector>

#include "kernels/embedding/embedding.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "runtime/exec.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

constexpr int64_t kLongest = 284672;  // the paper preset's planned longest local length (16 GiB, checkpointing)

TEST(ColumnSumsEmulated, ChunksDependOnRowsAlone) {
  for (int64_t T :
       std::vector<int64_t>{1, 2, 63, 64, 65, 1000, 65536, 65537, kLongest, int64_t{1} << 20, (int64_t{1} << 31) - 1}) {
    const column_sums::Chunks ch = column_sums::chunks_for(T);
    SCOPED_TRACE(testing::Message() << "T=" << T << " rows=" << ch.rows << " count=" << ch.count);
    EXPECT_GE(ch.count, 1);
    EXPECT_LE(ch.count, column_sums::kMaxChunks);
    EXPECT_LT((ch.count - 1) * ch.rows, T);
    EXPECT_GE(ch.count * ch.rows, T);
    EXPECT_GE(ch.rows, column_sums::kMinChunkRows);
  }
  EXPECT_EQ(column_sums::chunks_for(0).count, 0);
  EXPECT_EQ(column_sums_scratch_bytes(kLongest, 512, 2), 2 * 4 * 1024 * 512);
}

TEST(ColumnSumsEmulated, BiasGradientMatchesReferenceAndCpu) {
  uint64_t seed = 900;
  for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {64, 129}, {65, 200}, {5000, 100}, {kLongest, 512}}) {
    SCOPED_TRACE(testing::Message() << "T=" << T << " C=" << C);
    const Pair dY = random_pair(T * C, ++seed, 1), db0 = random_pair(C, seed, 2);
    std::vector<float> db = db0.f;
    test::emulated_bias_grad(dY.f.data(), db.data(), T, C);
    std::vector<double> want = db0.d;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) want[c] += dY.d[t * C + c];
    EXPECT_LE(rel_l2(db, want), 1e-6);
    // The CPU kernel (a linear layer of one input, so its GEMMs are trivial).
    std::vector<float> X(T, 1.f), W(C, 0.5f), dW(C, 0.f), db_cpu = db0.f;
    const ExecContext ctx;
    linear_backward(ctx, dY.f.data(), X.data(), W.data(), nullptr, dW.data(), db_cpu.data(), T, 1, C);
    synchronize(ctx.stream);
    EXPECT_LE(rel_l2(db, db_cpu), 1e-6);
  }
}

TEST(ColumnSumsEmulated, LayerNormParamGradientsMatchReferenceAndCpu) {
  uint64_t seed = 950;
  for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 13}, {7, 100}, {65, 129}, {3000, 256}, {kLongest, 512}}) {
    SCOPED_TRACE(testing::Message() << "T=" << T << " C=" << C);
    const Pair X = random_pair(T * C, ++seed, 1, 2.0, 3.0), g = random_pair(C, seed, 2, 0.1, 1.0),
               b = random_pair(C, seed, 3), dY = random_pair(T * C, seed, 4), dg0 = random_pair(C, seed, 5),
               db0 = random_pair(C, seed, 6);
    std::vector<float> Y(T * C), mean(T), rstd(T), dX(T * C), dg_cpu = dg0.f, db_cpu = db0.f;
    const ExecContext ctx;
    layernorm_forward(ctx, X.f.data(), g.f.data(), b.f.data(), Y.data(), mean.data(), rstd.data(), T, C);
    layernorm_backward(ctx, dY.f.data(), X.f.data(), g.f.data(), mean.data(), rstd.data(), dX.data(), dg_cpu.data(),
                       db_cpu.data(), T, C);
    synchronize(ctx.stream);
    std::vector<float> dg = dg0.f, db = db0.f;
    test::EmulatedGridLaunch L;
    column_sums_cuda::add_column_sums<2>(
        L, column_sums_cuda::LayerNormParamRows{dY.f.data(), X.f.data(), mean.data(), rstd.data(), C},
        {{dg.data(), db.data()}}, T, C);
    // The reference on the same (fp32) statistics.
    std::vector<double> want_g = dg0.d, want_b = db0.d;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        want_g[c] += dY.d[t * C + c] * ((X.d[t * C + c] - mean[t]) * static_cast<double>(rstd[t]));
        want_b[c] += dY.d[t * C + c];
      }
    EXPECT_LE(rel_l2(dg, want_g), 1e-5);
    EXPECT_LE(rel_l2(db, want_b), 1e-6);
    EXPECT_LE(rel_l2(dg, dg_cpu), 1e-5);
    EXPECT_LE(rel_l2(db, db_cpu), 1e-6);
  }
}

void expect_embedding_backward(const std::vector<int32_t>& ids, int64_t V, int64_t C, uint64_t seed) {
  const int64_t T = static_cast<int64_t>(ids.size());
  const Pair dY = random_pair(T * C, seed, 1), dT0 = random_pair(V * C, seed, 2);
  std::vector<float> dT = dT0.f;
  test::emulated_embedding_backward(ids, dY.f.data(), dT.data(), V, C);
  std::vector<double> want = dT0.d;
  for (int64_t t = 0; t < T; ++t)
    if (ids[t] >= 0 && ids[t] < V)
      for (int64_t c = 0; c < C; ++c) want[ids[t] * C + c] += dY.d[t * C + c];
  EXPECT_LE(rel_l2(dT, want), 1e-6);
  bool valid = true;
  for (int32_t id : ids) valid = valid && id >= 0 && id < V;
  if (!valid) return;  // the CPU kernel refuses out-of-range ids
  std::vector<float> dT_cpu = dT0.f;
  const ExecContext ctx;
  embedding_backward(ctx, ids.data(), dY.f.data(), dT_cpu.data(), T, V, C);
  synchronize(ctx.stream);
  // The CPU adds up to T terms one by one in fp32 (error ~ u sqrt(T)).
  EXPECT_LE(rel_l2(dT, dT_cpu), 1e-5);
}

TEST(ColumnSumsEmulated, EmbeddingBackwardMatchesReferenceAndCpu) {
  uint64_t seed = 1000;
  for (int64_t V : {1, 4, 30, 1000})
    for (int64_t T : {1, 7, 64, 65, 500, 20000})
      for (int64_t C : {13, 130}) {
        SCOPED_TRACE(testing::Message() << "V=" << V << " T=" << T << " C=" << C);
        ++seed;
        expect_embedding_backward(test::random_ids(T, V, seed, 1), V, C, seed);
      }
}

TEST(ColumnSumsEmulated, EmbeddingBackwardRunsAcrossPieces) {
  // Runs of one id longer than a piece, starting and ending inside pieces and
  // exactly at their edges; ids out of range (skipped on the GPU).
  const column_sums::Chunks ch = column_sums::chunks_for(20000);
  std::vector<int32_t> ids(20000);
  for (int64_t t = 0; t < 20000; ++t) {
    const int64_t r = t / (3 * ch.rows + 7);
    ids[t] = static_cast<int32_t>(t % 5 == 0 ? r % 3 : 3 + r % 4);
  }
  expect_embedding_backward(ids, 7, 40, 1100);
  std::vector<int32_t> edges(4 * ch.rows);
  for (int64_t t = 0; t < 4 * ch.rows; ++t) edges[t] = static_cast<int32_t>(t < ch.rows ? 2 : t < 3 * ch.rows ? 0 : 1);
  expect_embedding_backward(edges, 3, 40, 1101);
  std::vector<int32_t> invalid = test::random_ids(3000, 40, 1102, 1);
  for (int64_t t = 0; t < 3000; t += 7) invalid[t] = t % 2 ? -1 : 40;
  expect_embedding_backward(invalid, 30, 40, 1103);
}

TEST(ColumnSumsEmulated, EmbeddingBackwardAtTheLongestLength) {
  expect_embedding_backward(test::random_ids(kLongest, 25, 1200, 1), 25, 512, 1200);
}

}  // namespace
}  // namespace pf
