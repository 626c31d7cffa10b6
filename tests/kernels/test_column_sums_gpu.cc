// The backward's column sums on CUDA at the planner's longest local length of
// the paper preset (284,672 tokens; widths 512 and the FFN's 2,048): the
// linear bias gradient, LayerNorm's parameter gradients and the embedding
// backward give the same bits on two runs, agree with the CPU kernels to
// rounding, and, where the sums are plain additions (bias, dbeta, embedding),
// equal the block-emulated run of the same kernel code bit for bit: the GPU
// adds in the order the emulated test checks. Skipped without a GPU.
#include "tests/kernels/column_sums_emulation.h"
// First: the emulator defines the CUDA keywords the kernels use.

#include <gtest/gtest.h>

#include <vector>

#include "kernels/embedding/embedding.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "runtime/device.h"
#include "tests/kernels/test_posops_support.h"
#include "tests/support/gpu_harness.h"

namespace pf {
namespace {

using test::Gpu;
using test::Pair;
using test::random_pair;
using test::rel_l2;

constexpr int64_t kLongest = 284672;

TEST(ColumnSumsGpu, BiasGradientIsDeterministicAndMatchesEmulation) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Gpu gpu;
  for (int64_t C : {512, 2048}) {
    SCOPED_TRACE(testing::Message() << "T=" << kLongest << " C=" << C);
    const int64_t T = kLongest;
    const Pair dY = random_pair(T * C, 1500 + C, 1), db0 = random_pair(C, 1500 + C, 2);
    // One input column: the GEMMs are trivial, the bias gradient is the work.
    const std::vector<float> X(T, 1.f), W(C, 0.5f);
    float *dY_ = gpu.upload(dY.f), *X_ = gpu.upload(X), *W_ = gpu.upload(W), *dW_ = gpu.alloc(C);
    std::vector<std::vector<float>> runs;
    for (int r = 0; r < 2; ++r) {
      float* db_ = gpu.upload(db0.f);
      linear_backward(gpu.ctx(), dY_, X_, W_, nullptr, dW_, db_, T, 1, C);
      runs.push_back(gpu.download(db_, C));
    }
    EXPECT_EQ(runs[0], runs[1]);
    std::vector<float> cpu = db0.f, dW(C), emulated = db0.f;
    const ExecContext host;
    linear_backward(host, dY.f.data(), X.data(), W.data(), nullptr, dW.data(), cpu.data(), T, 1, C);
    synchronize(host.stream);
    EXPECT_LE(rel_l2(runs[0], cpu), 1e-6);
    if (C == 512) {
      test::emulated_bias_grad(dY.f.data(), emulated.data(), T, C);
      EXPECT_EQ(runs[0], emulated);
    }
  }
}

TEST(ColumnSumsGpu, LayerNormParamGradientsAreDeterministic) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Gpu gpu;
  const int64_t T = kLongest, C = 512;
  const Pair X = random_pair(T * C, 1600, 1, 2.0, 3.0), g = random_pair(C, 1600, 2, 0.1, 1.0),
             b = random_pair(C, 1600, 3), dY = random_pair(T * C, 1600, 4), dg0 = random_pair(C, 1600, 5),
             db0 = random_pair(C, 1600, 6);
  float *X_ = gpu.upload(X.f), *g_ = gpu.upload(g.f), *b_ = gpu.upload(b.f), *dY_ = gpu.upload(dY.f),
        *Y_ = gpu.alloc(T * C), *mean_ = gpu.alloc(T), *rstd_ = gpu.alloc(T), *dX_ = gpu.alloc(T * C);
  layernorm_forward(gpu.ctx(), X_, g_, b_, Y_, mean_, rstd_, T, C);
  std::vector<std::vector<float>> dgs, dbs;
  for (int r = 0; r < 2; ++r) {
    float *dg_ = gpu.upload(dg0.f), *db_ = gpu.upload(db0.f);
    layernorm_backward(gpu.ctx(), dY_, X_, g_, mean_, rstd_, dX_, dg_, db_, T, C);
    dgs.push_back(gpu.download(dg_, C));
    dbs.push_back(gpu.download(db_, C));
  }
  EXPECT_EQ(dgs[0], dgs[1]);
  EXPECT_EQ(dbs[0], dbs[1]);
  std::vector<float> Y(T * C), mean(T), rstd(T), dX(T * C), dg = dg0.f, db = db0.f;
  const ExecContext host;
  layernorm_forward(host, X.f.data(), g.f.data(), b.f.data(), Y.data(), mean.data(), rstd.data(), T, C);
  layernorm_backward(host, dY.f.data(), X.f.data(), g.f.data(), mean.data(), rstd.data(), dX.data(), dg.data(),
                     db.data(), T, C);
  synchronize(host.stream);
  EXPECT_LE(rel_l2(dgs[0], dg), 1e-5);
  EXPECT_LE(rel_l2(dbs[0], db), 1e-6);
  std::vector<float> emulated_db = db0.f;  // dbeta is a plain sum of dY
  test::emulated_bias_grad(dY.f.data(), emulated_db.data(), T, C);
  EXPECT_EQ(dbs[0], emulated_db);
}

TEST(ColumnSumsGpu, EmbeddingBackwardIsDeterministicAndMatchesEmulation) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Gpu gpu;
  const int64_t T = kLongest, C = 512, V = 25;
  const std::vector<int32_t> ids = test::random_ids(T, V, 1700, 1);
  const Pair dY = random_pair(T * C, 1700, 2), dT0 = random_pair(V * C, 1700, 3);
  auto* ids_ = reinterpret_cast<int32_t*>(gpu.alloc(T));
  copy_bytes_blocking(ids_, Device::cuda(0), ids.data(), Device::cpu(), 4 * T);
  float* dY_ = gpu.upload(dY.f);
  std::vector<std::vector<float>> runs;
  for (int r = 0; r < 2; ++r) {
    float* dT_ = gpu.upload(dT0.f);
    embedding_backward(gpu.ctx(), ids_, dY_, dT_, T, V, C);
    runs.push_back(gpu.download(dT_, V * C));
  }
  EXPECT_EQ(runs[0], runs[1]);
  std::vector<float> cpu = dT0.f, emulated = dT0.f;
  const ExecContext host;
  embedding_backward(host, ids.data(), dY.f.data(), cpu.data(), T, V, C);
  synchronize(host.stream);
  EXPECT_LE(rel_l2(runs[0], cpu), 1e-5);  // the CPU adds token by token in fp32
  test::emulated_embedding_backward(ids, dY.f.data(), emulated.data(), V, C);
  EXPECT_EQ(runs[0], emulated);
}

}  // namespace
}  // namespace pf
