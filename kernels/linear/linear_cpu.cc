// CPU linear layer on ctx.stream: X [T,in], W [out,in], b [out], Y [T,out]. The
// GEMMs use gemm_f32_cpu (oneDNN/OpenBLAS, threaded by the library; called from
// the stream's work with the same ctx, it runs inline); the bias broadcast
// is an OpenMP loop and the bias gradient sums fixed chunks of rows in fp32,
// then the chunks in order in double (deterministic for any thread count).
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/linear/linear.h"

namespace pf {
namespace {

constexpr int64_t kBiasRowChunk = 256;

}  // namespace

void linear_forward_cpu(const ExecContext& ctx, const float* X, const float* W, const float* b, float* Y, int64_t T,
                        int64_t in, int64_t out) {
  if (T == 0 || out == 0) return;
  host_launch(ctx, [=] {
    if (b) {
#pragma omp parallel for schedule(static) if (T * out > 65536)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) Y[t * out + o] = b[o];
    }
    gemm_f32_cpu(ctx, false, true, T, out, in, 1.0f, X, in, W, in, b ? 1.0f : 0.0f, Y, out);
  });
}

void linear_backward_cpu(const ExecContext& ctx, const float* dY, const float* X, const float* W, float* dX, float* dW,
                         float* db, int64_t T, int64_t in, int64_t out) {
  if (T == 0) return;
  host_launch(ctx, [=] {
    if (dX) gemm_f32_cpu(ctx, false, false, T, in, out, 1.0f, dY, out, W, in, 0.0f, dX, in);
    gemm_f32_cpu(ctx, true, false, out, in, T, 1.0f, dY, out, X, in, 1.0f, dW, in);
    if (db) {
      // fp32 column sums over fixed chunks of kBiasRowChunk rows (contiguous reads),
      // then the chunks added in order in double.
      const int64_t chunks = (T + kBiasRowChunk - 1) / kBiasRowChunk;
      std::vector<float> partial(static_cast<size_t>(chunks * out));
#pragma omp parallel for schedule(static) if (T * out > 65536)
      for (int64_t k = 0; k < chunks; ++k) {
        float* p = partial.data() + k * out;
        for (int64_t o = 0; o < out; ++o) p[o] = 0.f;
        const int64_t t1 = (k + 1) * kBiasRowChunk < T ? (k + 1) * kBiasRowChunk : T;
        for (int64_t t = k * kBiasRowChunk; t < t1; ++t)
          for (int64_t o = 0; o < out; ++o) p[o] += dY[t * out + o];
      }
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0.0;
        for (int64_t k = 0; k < chunks; ++k) acc += partial[static_cast<size_t>(k * out + o)];
        db[o] += static_cast<float>(acc);
      }
    }
  });
}

}  // namespace pf
