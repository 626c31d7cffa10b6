// The mma probes (tests/kernels/mma_probe_cuda.cuh) on the GPU (sm_80 or
// newer), against the same float64 products as under the emulator
// (test_mma_emulated.cc): the PTX fragment layouts, ldmatrix and cp.async as
// the hardware runs them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "runtime/device.h"
#include "tests/kernels/mma_probe_cuda.cuh"
#include "tests/kernels/mma_probe_reference.h"

namespace pf::mma_probe {
namespace {

template <typename T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

bool has_sm80() {
  if (cuda_device_count() == 0) return false;
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  return major >= 8;
}

std::vector<float> run(const Inputs& in, bool bf16) {
  float *C = to_device(in.C), *D = to_device(std::vector<float>(128, NAN));
  if (bf16) {
    uint16_t *A = to_device(in.A16), *B = to_device(in.B16);
    mma_bf16_probe<<<1, 32, kBf16ProbeSmem>>>(A, B, C, D, 0);
    cudaFree(A);
    cudaFree(B);
  } else {
    float *A = to_device(in.A), *B = to_device(in.B);
    mma_tf32_probe<<<1, 32>>>(A, B, C, D, 0);
    cudaFree(A);
    cudaFree(B);
  }
  std::vector<float> out(128);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.data(), D, 128 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(C);
  cudaFree(D);
  return out;
}

TEST(MmaGpu, Tf32AndBf16MatchFloat64) {
  if (!has_sm80()) GTEST_SKIP() << "no CUDA device of compute capability 8.0 or newer: " << cuda_unavailable_reason();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Inputs t = tf32_inputs(seed, static_cast<int>(seed % 7)), b = bf16_inputs(seed, static_cast<int>(seed % 7));
    // The hardware's order of the sums is its own: a few more roundings than the emulator's.
    EXPECT_LE(worst_error(run(t, false), t.want), 32 * 0x1p-24) << "tf32, seed " << seed;
    EXPECT_LE(worst_error(run(b, true), b.want), 64 * 0x1p-24) << "bf16, seed " << seed;
  }
}

}  // namespace
}  // namespace pf::mma_probe
