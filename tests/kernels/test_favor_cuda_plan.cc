// The FAVOR+ CUDA op's plan (plan_dims in favor_attention_cuda_fused.cuh)
// for devices of compute capability 7-9 and their shared memory, compiled
// on the host under the block emulator like the kernels' tests beside it
// (test_favor_cuda_emulated.cc).
#include "tests/support/cuda_block_emulator.h"
// First: the emulator defines the CUDA keywords and PF_EMULATED_MMA.

#include <gtest/gtest.h>

#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/favor_attention/favor_attention_cuda_launch.cuh"

namespace pf {
namespace {

using namespace favor_cuda;

// plan_dims, the sizes favor_attention_cuda.cu's plan() gives a call on a
// device of compute capability 7, 8 or 9 whose blocks may take 48, 96, 99,
// 163 or 227 KiB of shared memory: wherever favor_min_smem_bytes fits a shape
// (favor_cuda_fits, which sends the op to the fused kernels rather than the
// slabs), a plan exists and fits the device; tensor-core math only from
// sm_80. Before the tile kernels' 16-row plan was the last choice, d = 113 to
// 127 at m = 241 to 256 in TF32 or bf16 on a 99 KiB device found none (the
// resident kernels' 16-row plan adds their stage). And the plan of H100
// and H200 at d = 64, m = 256: the first choice.
TEST(FavorCudaEmulated, PlanTakesEveryShapeThatFits) {
  const int64_t limits[] = {48 * 1024, 96 * 1024, 99 * 1024, 163 * 1024, 227 * 1024};
  std::vector<int64_t> ds;
  for (int64_t d = 1; d <= 128; ++d)
    if (d <= 20 || d % 16 <= 1 || d % 16 == 15 || d >= 110) ds.push_back(d);
  int fitting = 0, tile_plans = 0;
  for (int major : {7, 8, 9})
    for (TileMath math : {TileMath::Fp32, TileMath::Tf32, TileMath::Bf16})
      for (int64_t d : ds)
        for (int64_t m : {1, 7, 16, 64, 100, 241, 256, 300, 1024})
          for (int64_t limit : limits) {
            FavorShape s = favor_attention_params(1, 2, 100, d, m, true, FeatureKernel::Softmax).shape;
            s.tile_math = math;
            if (favor_min_smem_bytes(s) > limit) continue;
            ++fitting;
            SCOPED_TRACE(testing::Message() << "major=" << major << " math=" << tile_math_name(math) << " d=" << d
                                            << " m=" << m << " limit=" << limit);
            Dims D;
            ASSERT_TRUE(plan_dims(s, major, limit, &D));
            EXPECT_LE(smem_bytes(D), limit);
            EXPECT_EQ(D.math, major >= 8 ? math : TileMath::Fp32);
            if (D.math != TileMath::Fp32 && !D.resident && resident_fits(dims_for(s, 16, D.math))) ++tile_plans;
          }
  EXPECT_GT(fitting, 1000);
  EXPECT_GT(tile_plans, 0) << "no shape took the tile kernels' plan where the resident kernels could run";

  FavorShape s = favor_attention_params(1, 2, 100, 120, 256, true, FeatureKernel::Softmax).shape;
  s.tile_math = TileMath::Tf32;
  Dims D;
  ASSERT_TRUE(plan_dims(s, 8, 99 * 1024, &D));
  EXPECT_FALSE(D.resident);
  EXPECT_EQ(D.ct, 16);
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
    s = favor_attention_params(1, 8, 65536, 64, 256, true, FeatureKernel::Softmax).shape;
    s.tile_math = math;
    ASSERT_TRUE(plan_dims(s, 9, 227 * 1024, &D));
    EXPECT_EQ(D.ct, 32);
    EXPECT_TRUE(D.smem_state && D.resident && D.smem_projection) << tile_math_name(math);
  }
}

}  // namespace
}  // namespace pf
