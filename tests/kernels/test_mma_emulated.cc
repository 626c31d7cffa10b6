// The warp-level PTX wrappers (runtime/cuda_mma.cuh) under the block
// emulator, lane by lane: mma.sync m16n8k8 tf32 and m16n8k16 bf16 with
// operands gathered by the PTX ISA's fragment layouts, ldmatrix (x4, x2
// transposed) and cp.async (16 and 4 bytes), against float64 products of the rounded
// operands, on fresh random inputs spread over 0 to 6 decades. And the
// emulator's teeth: a wrong fragment layout (two A registers swapped) gives
// a wrong product, a skipped cp.async wait leaves the shared tiles unread
// (NaN), a missing __syncthreads reads shared memory before the other warp
// wrote it under either schedule, and the roundings are the hardware's (tf32 ties away, bf16 ties to
// even).
#include "tests/support/cuda_block_emulator.h"
// First: the emulator defines the CUDA keywords and PF_EMULATED_MMA.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/mma_probe_cuda.cuh"
#include "tests/kernels/mma_probe_reference.h"

namespace pf::mma_probe {
namespace {

std::vector<float> run_tf32(const Inputs& in, int mutation) {
  std::vector<float> D(128, NAN);
  pf_emu::launch(pf_emu::Dim3{1, 1, 1}, pf_emu::Dim3{32, 1, 1}, 0,
                 [&] { mma_tf32_probe(in.A.data(), in.B.data(), in.C.data(), D.data(), mutation); });
  return D;
}

std::vector<float> run_bf16(const Inputs& in, int mutation) {
  std::vector<float> D(128, NAN);
  pf_emu::launch(pf_emu::Dim3{1, 1, 1}, pf_emu::Dim3{32, 1, 1}, kBf16ProbeSmem,
                 [&] { mma_bf16_probe(in.A16.data(), in.B16.data(), in.C.data(), D.data(), mutation); });
  return D;
}

TEST(MmaEmulated, Tf32MatchesFloat64) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Inputs in = tf32_inputs(seed, static_cast<int>(seed % 7));
    EXPECT_LE(worst_error(run_tf32(in, 0), in.want), 9 * 0x1p-24) << "seed " << seed;
  }
}

TEST(MmaEmulated, Bf16ThroughCpAsyncAndLdmatrixMatchesFloat64) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Inputs in = bf16_inputs(seed, static_cast<int>(seed % 7));
    EXPECT_LE(worst_error(run_bf16(in, 0), in.want), 17 * 0x1p-24) << "seed " << seed;
  }
}

TEST(MmaEmulated, AWrongFragmentLayoutGivesAWrongProduct) {
  const Inputs t = tf32_inputs(7, 0), b = bf16_inputs(7, 0);
  EXPECT_GT(worst_error(run_tf32(t, 1), t.want), 1e-2);
  EXPECT_GT(worst_error(run_bf16(b, 1), b.want), 1e-2);
}

TEST(MmaEmulated, ASkippedCpAsyncWaitReadsTheTilesBeforeTheCopy) {
  const Inputs b = bf16_inputs(3, 2);
  EXPECT_TRUE(std::isnan(worst_error(run_bf16(b, 2), b.want)));
}

// Two warps exchange values through shared memory: each thread writes its
// slot, then (after the barrier, unless `barrier` is false) reads the slot
// of the same lane in the other warp.
void exchange_probe(float* out, bool barrier) {
  PF_CUDA_SHARED_FLOATS(slots);
  const int t = static_cast<int>(threadIdx.x);
  slots[t] = static_cast<float>(t + 1);
  if (barrier) __syncthreads();
  out[t] = slots[(t + 32) % 64];
}

std::vector<float> run_exchange(bool barrier, pf_emu::Schedule schedule) {
  std::vector<float> out(64, -1.f);
  pf_emu::launch(
      pf_emu::Dim3{1, 1, 1}, pf_emu::Dim3{64, 1, 1}, 64 * sizeof(float), [&] { exchange_probe(out.data(), barrier); },
      schedule);
  return out;
}

// The emulator's teeth for barriers: with the barrier every thread reads the
// other warp's value under both schedules; without it, lockstep (lower
// threads first) has the first warp read slots the second has not written,
// and one warp at a time (the last warp first) the reverse: NaN, the fresh
// shared memory, in either case.
TEST(MmaEmulated, AMissingBarrierReadsSharedMemoryNoThreadWroteYet) {
  for (const pf_emu::Schedule schedule : {pf_emu::Schedule::Lockstep, pf_emu::Schedule::WarpByWarp}) {
    const std::vector<float> good = run_exchange(true, schedule);
    for (int t = 0; t < 64; ++t) EXPECT_EQ(good[static_cast<size_t>(t)], static_cast<float>((t + 32) % 64 + 1));
  }
  const std::vector<float> lockstep = run_exchange(false, pf_emu::Schedule::Lockstep);
  const std::vector<float> by_warp = run_exchange(false, pf_emu::Schedule::WarpByWarp);
  for (int t = 0; t < 32; ++t) {
    EXPECT_TRUE(std::isnan(lockstep[static_cast<size_t>(t)])) << "thread " << t;
    EXPECT_TRUE(std::isnan(by_warp[static_cast<size_t>(t + 32)])) << "thread " << t + 32;
  }
}

TEST(MmaEmulated, RoundingsAreTheHardwares) {
  // tf32: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: away from zero.
  EXPECT_EQ(pf_emu::tf32_bits(1.0f + 0x1p-11f), 0x3f802000u);
  EXPECT_EQ(pf_emu::tf32_bits(1.0f + 0x1p-12f), 0x3f800000u);
  // bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3 2^-8 up.
  EXPECT_EQ(pf_emu::bf16x2_bits(1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f), 0x3f823f80u);
  EXPECT_EQ(bf16_bits(1.0f + 0x1p-8f), 0x3f80u);
  EXPECT_TRUE(std::isnan(pf_emu::float_of((pf_emu::bf16x2_bits(NAN, 0.f) & 0xffffu) << 16)));
}

}  // namespace
}  // namespace pf::mma_probe
