// CPU linear layer: X [T,in], W [out,in], b [out], Y [T,out]. The GEMMs use
// gemm_f32_cpu (oneDNN/OpenBLAS, threaded by the library); the bias broadcast
// is an OpenMP loop and the bias gradient sums columns in double, in row order,
// one column block per thread (deterministic for any thread count).
#include "kernels/gemm/gemm.h"
#include "kernels/linear/linear.h"

namespace pf {
namespace {

constexpr int64_t kColumnBlock = 256;

}  // namespace

void linear_forward_cpu(const float* X, const float* W, const float* b, float* Y, int64_t T, int64_t in, int64_t out) {
  if (T == 0 || out == 0) return;
  if (b) {
#pragma omp parallel for schedule(static) if (T * out > 65536)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) Y[t * out + o] = b[o];
  }
  gemm_f32_cpu(false, true, T, out, in, 1.0f, X, in, W, in, b ? 1.0f : 0.0f, Y, out);
}

void linear_backward_cpu(const float* dY, const float* X, const float* W, float* dX, float* dW, float* db, int64_t T,
                         int64_t in, int64_t out) {
  if (T == 0) return;
  if (dX) gemm_f32_cpu(false, false, T, in, out, 1.0f, dY, out, W, in, 0.0f, dX, in);
  gemm_f32_cpu(true, false, out, in, T, 1.0f, dY, out, X, in, 1.0f, dW, in);
  if (db) {
    const int64_t blocks = (out + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (T * out > 65536)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t o0 = blk * kColumnBlock, o1 = o0 + kColumnBlock < out ? o0 + kColumnBlock : out;
      double acc[kColumnBlock] = {};
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = o0; o < o1; ++o) acc[o - o0] += dY[t * out + o];
      for (int64_t o = o0; o < o1; ++o) db[o] += static_cast<float>(acc[o - o0]);
    }
  }
}

}  // namespace pf
