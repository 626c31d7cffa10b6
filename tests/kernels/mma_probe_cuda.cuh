// Probe kernels of the warp-level PTX wrappers (runtime/cuda_mma.cuh), one
// warp each, run under the block emulator (test_mma_emulated.cc) and on the
// GPU (test_mma_gpu.cu) against the same float64 products:
//   mma_tf32_probe  D = A B + C, A [16, 8], B [8, 8] (k rows), C, D [16, 8],
//                   row-major fp32 in global memory; each lane gathers its
//                   registers by the PTX layout, rounding to tf32.
//   mma_bf16_probe  D = A B + C, A [16, 16] and B [16, 8] (k rows) as bf16
//                   bits in global memory, copied to shared memory with
//                   cp.async (one 16-byte piece per lane), then loaded with
//                   ldmatrix (A: x4; B: x2.trans); C copied in by 4-byte
//                   cp.async (four a lane). Shared memory: kBf16ProbeSmem.
// The `mutation` argument breaks one rule on purpose, for the tests that
// check that the emulator notices: 1 swaps the A registers a1 and a2 (a
// wrong fragment layout), 2 skips the cp.async wait (the bf16 probe).
#pragma once

#include <cstdint>

#include "runtime/cuda_mma.cuh"

#ifndef PF_CUDA_SHARED_FLOATS
#define PF_CUDA_SHARED_FLOATS(name) extern __shared__ __align__(32) float name[]
#endif

namespace pf::mma_probe {

__global__ void mma_tf32_probe(const float* A, const float* B, const float* C, float* D, int mutation) {
  const unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (unsigned i = 0; i < 4; ++i) a[i] = tf32_bits(A[(g + 8 * (i % 2)) * 8 + t + 4 * (i / 2)]);
  if (mutation == 1) {
    const uint32_t x = a[1];
    a[1] = a[2];
    a[2] = x;
  }
  for (unsigned i = 0; i < 2; ++i) b[i] = tf32_bits(B[(t + 4 * i) * 8 + g]);
  for (unsigned i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  mma_m16n8k8_tf32(d, a, b, c);
  for (unsigned i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

constexpr int kBf16ProbeSmem = (256 + 128) * 2 + 128 * 4;

// A16: [16, 16] bf16 bits (256 x uint16), B16: [16, 8] bf16 bits (128).
__global__ void mma_bf16_probe(const uint16_t* A16, const uint16_t* B16, const float* C, float* D, int mutation) {
  PF_CUDA_SHARED_FLOATS(smem);
  uint16_t* As = reinterpret_cast<uint16_t*>(smem);  // [16, 16]
  uint16_t* Bs = As + 256;                           // [16, 8]
  float* Cs = reinterpret_cast<float*>(Bs + 128);    // [16, 8]
  const unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  cp_async_16(As + 8 * lane, A16 + 8 * lane);
  if (lane < 16) cp_async_16(Bs + 8 * lane, B16 + 8 * lane);
  for (unsigned i = 0; i < 4; ++i) cp_async_4(Cs + 4 * lane + i, C + 4 * lane + i);
  cp_async_commit();
  if (mutation != 2) cp_async_wait<0>();
  __syncthreads();
  uint32_t a[4], b[2];
  const unsigned tile = lane / 8, r = lane % 8;
  ldmatrix<4, false>(a, As + ((tile % 2) * 8 + r) * 16 + (tile / 2) * 8);
  ldmatrix<2, true>(b, Bs + (8 * (tile % 2) + r) * 8);
  if (mutation == 1) {
    const uint32_t x = a[1];
    a[1] = a[2];
    a[2] = x;
  }
  float c[4], d[4];
  for (unsigned i = 0; i < 4; ++i) c[i] = Cs[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  mma_m16n8k16_bf16(d, a, b, c);
  for (unsigned i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
  if (mutation == 2) cp_async_wait<0>();  // the copies complete before the kernel ends
}

}  // namespace pf::mma_probe
