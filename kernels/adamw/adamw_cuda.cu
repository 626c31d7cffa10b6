// CUDA AdamW over a flat fp32 buffer: params, grads, m, v [n] (grid-stride).
#include <cmath>

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/adamw_math.h"
#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"

namespace pf {
namespace {

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, int64_t n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float bc1, float bc2, float grad_scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float p = params[i], mi = m[i], vi = v[i];
    adamw_element(p, grads[i] * grad_scale, mi, vi, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    params[i] = p, m[i] = mi, v[i] = vi;
  }
}

}  // namespace

void adamw_update_cuda(const ExecContext& ctx, float* params, const float* grads, float* m, float* v, int64_t n,
                       int64_t step, const AdamWConfig& cfg, float grad_scale) {
  if (n == 0) return;
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(step)));
  adamw_kernel<<<grid_size(n, 256, 65536), 256, 0, cuda_stream(ctx)>>>(
      params, grads, m, v, n, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, bc1, bc2, grad_scale);
  PF_CUDA_CHECK_LAUNCH();
}

}  // namespace pf
