// Warp-level tensor-core operations through PTX, written once for the CUDA
// kernels and for the block emulator (tests/support/cuda_block_emulator.h,
// which defines PF_EMULATED_MMA and emulates each one lane by lane):
//   mma_m16n8k8_tf32   D[16x8] = A[16x8] B[8x8] + C, fp32 accumulation
//   mma_m16n8k16_bf16  D[16x8] = A[16x16] B[16x8] + C, fp32 accumulation
//   ldmatrix<N, T>     N (1, 2, 4) 8x8 tiles of 16-bit elements from shared
//                      memory, T: transposed
//   cp_async_16        a 16-byte copy global -> shared (cp_async_4: 4
//                      bytes), completed by cp_async_wait<G>() (all but
//                      the G newest groups of cp_async_commit())
//   exp2_approx        2^x on the special-function unit (ex2.approx.ftz.f32:
//                      relative error about 2^-22, results below the normal
//                      range 0, 2^-inf = 0; any target), for the kernels
//                      whose operands are rounded to TF32 or bf16 anyway;
//                      emulated by exp2f with the same flush (not the
//                      hardware's bits). kLog2e: e^x = 2^(x kLog2e)
// The fragment layouts are the PTX ISA's (mma.sync m16n8k8 .tf32 and
// m16n8k16 .bf16, row.col), with g = lane / 4 and t = lane % 4:
//   tf32 A: a0 (g, t)  a1 (g + 8, t)  a2 (g, t + 4)  a3 (g + 8, t + 4)
//   tf32 B: b0 (t, g)  b1 (t + 4, g)                       (row k, column n)
//   bf16 A: a0 (g, 2t..2t+1)  a1 (g + 8, 2t..)  a2 (g, 2t+8..)  a3 (g + 8, 2t+8..)
//   bf16 B: b0 (2t..2t+1, g)  b1 (2t+8..2t+9, g)  (two bf16 per register, the
//           lower-numbered element in the low half)
//   C, D:   c0, c1 (g, 2t..2t+1)  c2, c3 (g + 8, 2t..2t+1)
// They need sm_80 or newer; on older targets each traps (V100 builds keep
// their SIMT paths).
#pragma once

#include <cstdint>

namespace pf {
constexpr float kLog2e = 1.4426950408889634f;
}  // namespace pf

#if defined(PF_EMULATED_MMA)

#include <cmath>
#include <limits>

namespace pf {
inline float exp2_approx(float x) {
  const float y = std::exp2(x);
  return y < std::numeric_limits<float>::min() ? 0.f : y;  // .ftz: no subnormal results
}
inline uint32_t tf32_bits(float x) { return ::pf_emu::tf32_bits(x); }
inline uint32_t bf16x2_bits(float lo, float hi) { return ::pf_emu::bf16x2_bits(lo, hi); }
inline void mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  ::pf_emu::mma_m16n8k8_tf32(d, a, b, c);
}
inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  ::pf_emu::mma_m16n8k16_bf16(d, a, b, c);
}
template <int N, bool Trans>
inline void ldmatrix(uint32_t r[N], const void* row) {
  ::pf_emu::ldmatrix(N, Trans, r, row);
}
inline void cp_async_16(void* shared_dst, const void* global_src) { ::pf_emu::cp_async(shared_dst, global_src, 16); }
inline void cp_async_4(void* shared_dst, const void* global_src) { ::pf_emu::cp_async(shared_dst, global_src, 4); }
inline void cp_async_commit() { ::pf_emu::cp_async_commit(); }
template <int G>
inline void cp_async_wait() {
  ::pf_emu::cp_async_wait(G);
}
}  // namespace pf

#else

#include <cuda_runtime.h>

namespace pf {

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define PF_MMA_UNSUPPORTED() __trap()
#else
#define PF_MMA_UNSUPPORTED() (void)0
#endif

// cvt.rna.tf32.f32: round to nearest, ties away, 10 stored mantissa bits.
__device__ __forceinline__ uint32_t tf32_bits(float x) {
  uint32_t r = 0;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
  PF_MMA_UNSUPPORTED();
#endif
  return r;
}

// cvt.rn.bf16x2.f32: two floats rounded to nearest even bf16, `lo` in the low half.
__device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi) {
  uint32_t r = 0;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  PF_MMA_UNSUPPORTED();
#endif
  return r;
}

// One mma.sync of shape m16n8 with fp32 accumulators: the instruction (its
// shape and operand types) is all the two wrappers below differ in; the
// operands are d, c (4 floats), a (4 registers) and b (2) of the caller.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define PF_MMA_M16N8_F32(instruction)                                                                               \
  asm volatile(instruction " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"                 \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), \
                 "f"(c[3]))
#else
#define PF_MMA_M16N8_F32(instruction) PF_MMA_UNSUPPORTED()
#endif

__device__ __forceinline__ void mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                 const float c[4]) {
  PF_MMA_M16N8_F32("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
}

__device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                  const float c[4]) {
  PF_MMA_M16N8_F32("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
}

#undef PF_MMA_M16N8_F32

// Lanes 8i..8i+7 give the rows (16 bytes each) of tile i; register i of
// every lane receives its part of tile i.
template <int N, bool Trans>
__device__ __forceinline__ void ldmatrix(uint32_t r[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 tiles");
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (N == 1) {
    if constexpr (Trans)
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
  } else if constexpr (N == 2) {
    if constexpr (Trans)
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                   : "=r"(r[0]), "=r"(r[1])
                   : "r"(s));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
  } else {
    if constexpr (Trans)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(s));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(s));
  }
#else
  PF_MMA_UNSUPPORTED();
#endif
}

__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global_src));
#else
  PF_MMA_UNSUPPORTED();
#endif
}

// .ca: the L1-cached form, the only one that takes fewer than 16 bytes.
__device__ __forceinline__ void cp_async_4(void* shared_dst, const void* global_src) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(global_src));
#else
  PF_MMA_UNSUPPORTED();
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  PF_MMA_UNSUPPORTED();
#endif
}

template <int G>
__device__ __forceinline__ void cp_async_wait() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(G) : "memory");  // no read of the copies moves above it
#else
  PF_MMA_UNSUPPORTED();
#endif
}

#undef PF_MMA_UNSUPPORTED

}  // namespace pf

#endif
