// CPU backend of the feature maps (feature_map.h), fp32, on ctx.stream (the
// argument checks run at the call, as on CUDA):
//   forward:  U = s X W^T by gemm_f32_cpu straight into Phi [n, m], then per
//             row (OpenMP) the exponent, the row max c_i and the features in place;
//   backward: T = G . Phi (or the Relu mask) [n, m] with the row sums,
//             dX = s T W [n, d] by gemm_f32_cpu, then dX_i -= s^2 (sum_l T_il) X_i;
//             dW += s T^T X [m, d] by gemm_f32_cpu when dW is given.
#include <algorithm>
#include <cmath>

#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_rows.h"
#include "kernels/gemm/gemm.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int64_t kRowBlock = 64;

// Runs f(i0, rows) over blocks of rows, in parallel.
template <typename F>
void for_row_blocks(int64_t n, F&& f) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) f(i0, std::min(kRowBlock, n - i0));
}

float half_sq_norm(const float* row, int64_t d, float s) {
  float sq = 0.f;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < d; ++j) sq += row[j] * row[j];
  return 0.5f * s * s * sq;
}

// Turns U (= s X W^T, in Phi) into features and log-scales.
void finish_rows(const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const float* X, float* Phi,
                 float* log_scale) {
  const FeatureRowParams r(p, m);
  for_row_blocks(n, [&](int64_t i0, int64_t rows) {
    feature_rows_finish(r, rows, d, m, X + i0 * d, Phi + i0 * m, log_scale ? log_scale + i0 : nullptr);
  });
}

}  // namespace

void feature_map_forward_cpu(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                             const float* X, const float* W, float* Phi, float* log_scale) {
  check_feature_map_args("feature_map_forward_cpu", p, n, d, m);
  if (n == 0) return;
  host_launch(ctx, [=] {
    gemm_f32_cpu(ctx, false, true, n, m, d, static_cast<float>(p.data_scale), X, d, W, d, 0.f, Phi, m);
    finish_rows(p, n, d, m, X, Phi, log_scale);
  });
}

void feature_map_backward_cpu(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m,
                              const float* X, const float* W, const float* Phi, const float* dPhi, float* dX,
                              float* dW) {
  check_feature_map_args("feature_map_backward_cpu", p, n, d, m);
  if (n == 0) return;
  host_launch(ctx, [=] {
    const float s = static_cast<float>(p.data_scale);
    const bool exponential = feature_is_exponential(p);
    MemoryTracker untracked(Device::cpu());  // holds the scratch when the context has no tracker
    MemoryTracker& tracker = ctx.tracker ? *ctx.tracker : untracked;
    const Tensor t_buf = Tensor::empty({n * m}, DType::f32, tracker, "feature_map_backward.t");
    const Tensor sum_buf = Tensor::empty({n}, DType::f32, tracker, "feature_map_backward.rowsum");
    float* T = t_buf.data<float>();
    float* rowsum = sum_buf.data<float>();
    // Without Phi: T holds the recomputed features (Softmax) or U = s X W^T (Relu mask u > 0).
    if (!Phi) {
      gemm_f32_cpu(ctx, false, true, n, m, d, s, X, d, W, d, 0.f, T, m);
      if (exponential) finish_rows(p, n, d, m, X, T, nullptr);
    }
    const FeatureRowParams r(p, m);
    const float* src = Phi ? Phi : T;
    for_row_blocks(n, [&](int64_t i0, int64_t rows) {
      feature_rows_grad(r, rows, m, dPhi + i0 * m, src + i0 * m, Phi != nullptr, T + i0 * m, rowsum + i0);
    });
    gemm_f32_cpu(ctx, false, false, n, d, m, s, T, m, W, d, 0.f, dX, d);
    if (dW) gemm_f32_cpu(ctx, true, false, m, d, n, s, T, m, X, d, 1.f, dW, d);
    for_row_blocks(n, [&](int64_t i0, int64_t rows) {
      feature_rows_grad_finish(r, rows, d, X + i0 * d, rowsum + i0, dX + i0 * d);
    });
  });
}

void trig_features_forward(const ExecContext& ctx, double data_scale, int64_t n, int64_t d, int64_t m, const float* X,
                           const float* W, float* Phi, float* log_scale) {
  FeatureMapParams p;
  p.data_scale = data_scale;
  check_feature_map_args("trig_features_forward", p, n, d, m);
  PF_REQUIRE(ValueError, ctx.device.is_cpu(),
             "trig_features_forward is an analysis-only CPU kernel; called on " << ctx.device.str());
  if (n == 0) return;
  host_launch(ctx, [=] {
    const float s = static_cast<float>(data_scale);
    const float inv_sqrt_m = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m)));
    // U lands in the sin half of each row (ldc = 2m); each entry then fills both halves.
    gemm_f32_cpu(ctx, false, true, n, m, d, s, X, d, W, d, 0.f, Phi, 2 * m);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float* out = Phi + i * 2 * m;
      for (int64_t l = 0; l < m; ++l) {
        const float u = out[l];
        out[l] = inv_sqrt_m * std::sin(u);
        out[m + l] = inv_sqrt_m * std::cos(u);
      }
      if (log_scale) log_scale[i] = half_sq_norm(X + i * d, d, s);
    }
  });
}

}  // namespace pf
