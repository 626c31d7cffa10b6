// Dispatch of the feature maps on ctx.device, default parameters and the
// shared argument checks (shapes in feature_map.h).
#include "kernels/feature_map/feature_map.h"

#include <cmath>

#include "runtime/check.h"

namespace pf {

FeatureMapParams default_feature_params(FeatureKernel kernel, int64_t d) {
  PF_REQUIRE(ValueError, d > 0, "feature map head dimension must be positive, got d=" << d);
  FeatureMapParams p;
  p.kernel = kernel;
  p.data_scale = kernel == FeatureKernel::Elu ? 1.0 : std::pow(static_cast<double>(d), -0.25);
  p.relu_eps = 1e-3;
  return p;
}

const char* feature_kernel_name(FeatureKernel kernel) {
  switch (kernel) {
    case FeatureKernel::Softmax: return "softmax";
    case FeatureKernel::Relu: return "relu";
    case FeatureKernel::Elu: return "elu";
    case FeatureKernel::Exp: return "exp";
  }
  return "?";
}

bool feature_is_exponential(const FeatureMapParams& p) {
  return p.kernel == FeatureKernel::Softmax || p.kernel == FeatureKernel::Exp;
}

bool feature_subtracts_half_norm(const FeatureMapParams& p) {
  return p.kernel == FeatureKernel::Softmax || (p.kernel == FeatureKernel::Exp && p.half_norm);
}

void check_feature_map_args(const char* op, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m) {
  PF_REQUIRE(ValueError, n >= 0 && d > 0 && m > 0,
             op << ": need n >= 0, d > 0, m > 0, got n=" << n << " d=" << d << " m=" << m);
  PF_REQUIRE(ValueError,
             p.kernel == FeatureKernel::Softmax || p.kernel == FeatureKernel::Relu || p.kernel == FeatureKernel::Elu ||
                 p.kernel == FeatureKernel::Exp,
             op << ": unknown feature kernel " << static_cast<int>(p.kernel));
  PF_REQUIRE(ValueError, std::isfinite(p.data_scale) && std::isfinite(p.relu_eps) && p.relu_eps >= 0,
             op << ": need finite data_scale and relu_eps >= 0, got data_scale=" << p.data_scale
                << " relu_eps=" << p.relu_eps);
}

void feature_map_forward(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                         const float* X, const float* W, float* Phi, float* log_scale) {
  if (ctx.device.is_cuda())
    feature_map_forward_cuda(ctx, p, n, d, m, X, W, Phi, log_scale);
  else
    feature_map_forward_cpu(ctx, p, n, d, m, X, W, Phi, log_scale);
}

void feature_map_backward(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                          const float* X, const float* W, const float* Phi, const float* dPhi, float* dX,
                          float* dW) {
  if (ctx.device.is_cuda())
    feature_map_backward_cuda(ctx, p, n, d, m, X, W, Phi, dPhi, dX, dW);
  else
    feature_map_backward_cpu(ctx, p, n, d, m, X, W, Phi, dPhi, dX, dW);
}

void feature_map_forward(const ExecContext& ctx, const FeatureMapParams& p, DType storage, int64_t n, int64_t d,
                         int64_t m, const void* X, const float* W, void* Phi, float* log_scale) {
  if (ctx.device.is_cuda()) return feature_map_forward_cuda(ctx, p, storage, n, d, m, X, W, Phi, log_scale);
  PF_REQUIRE(ValueError, storage == DType::f32,
             "feature_map_forward on " << ctx.device.str() << ": storage " << dtype_name(storage)
                                       << " is supported on CUDA only (the CPU backend stores f32)");
  feature_map_forward(ctx, p, n, d, m, static_cast<const float*>(X), W, static_cast<float*>(Phi), log_scale);
}

void feature_map_backward(const ExecContext& ctx, const FeatureMapParams& p, DType storage, int64_t n, int64_t d,
                          int64_t m, const void* X, const float* W, const void* Phi, const void* dPhi, void* dX) {
  if (ctx.device.is_cuda()) return feature_map_backward_cuda(ctx, p, storage, n, d, m, X, W, Phi, dPhi, dX);
  PF_REQUIRE(ValueError, storage == DType::f32,
             "feature_map_backward on " << ctx.device.str() << ": storage " << dtype_name(storage)
                                        << " is supported on CUDA only (the CPU backend stores f32)");
  feature_map_backward(ctx, p, n, d, m, static_cast<const float*>(X), W, static_cast<const float*>(Phi),
                       static_cast<const float*>(dPhi), static_cast<float*>(dX));
}

}  // namespace pf
