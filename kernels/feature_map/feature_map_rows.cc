#include "kernels/feature_map/feature_map_rows.h"

#include <cmath>

#include "kernels/feature_map/feature_map_math.h"
#include "runtime/vector_math.h"


namespace pf {

FeatureRowParams::FeatureRowParams(const FeatureMapParams& p, int64_t m)
    : data_scale(static_cast<float>(p.data_scale)),
      inv_sqrt_m(static_cast<float>(1.0 / std::sqrt(static_cast<double>(m)))),
      eps(static_cast<float>(p.relu_eps)),
      softmax(feature_is_exponential(p)),
      half_norm(feature_subtracts_half_norm(p)),
      elu(p.kernel == FeatureKernel::Elu) {}

PF_VECTOR_CLONES
void feature_rows_finish(const FeatureRowParams& r, int64_t rows, int64_t d, int64_t m, const float* X, float* Phi,
                         float* c) {
  const float s = r.data_scale, inv_sqrt_m = r.inv_sqrt_m, eps = r.eps;
  for (int64_t i = 0; i < rows; ++i) {
    float* out = Phi + i * m;
    float top = 0.f;
    if (r.softmax) {
      const float* x = X + i * d;
      float sq = 0.f;
#pragma omp simd reduction(+ : sq)
      for (int64_t j = 0; j < d; ++j) sq += x[j] * x[j];
      const float h = r.half_norm ? 0.5f * s * s * sq : 0.f;
      top = -INFINITY;
#pragma omp simd reduction(max : top)
      for (int64_t l = 0; l < m; ++l) {
        const float e = favor_exponent(out[l], h);
        out[l] = e;
        top = e > top ? e : top;
      }
#pragma omp simd
      for (int64_t l = 0; l < m; ++l) out[l] = favor_feature(out[l], top, inv_sqrt_m);
    } else if (r.elu) {
#pragma omp simd
      for (int64_t l = 0; l < m; ++l) out[l] = elu_feature(out[l]);
    } else {
#pragma omp simd
      for (int64_t l = 0; l < m; ++l) out[l] = relu_feature(out[l], eps);
    }
    if (c) c[i] = top;
  }
}

PF_VECTOR_CLONES
void feature_rows_grad(const FeatureRowParams& r, int64_t rows, int64_t m, const float* dPhi, const float* Phi,
                       bool phi_is_features, float* T, float* rowsum) {
  const float eps = r.eps;
  for (int64_t i = 0; i < rows; ++i) {
    const float* g = dPhi + i * m;
    const float* src = Phi + i * m;
    float* t = T + i * m;
    float sum = 0.f;
    if (r.softmax) {
#pragma omp simd reduction(+ : sum)
      for (int64_t l = 0; l < m; ++l) {
        t[l] = favor_grad_weight(g[l], src[l]);
        sum += t[l];
      }
    } else if (r.elu) {
      if (phi_is_features) {
#pragma omp simd
        for (int64_t l = 0; l < m; ++l) t[l] = elu_grad_weight(g[l], src[l]);
      } else {
#pragma omp simd
        for (int64_t l = 0; l < m; ++l) t[l] = elu_grad_weight(g[l], elu_feature(src[l]));
      }
    } else {
      const float threshold = phi_is_features ? eps : 0.f;
#pragma omp simd
      for (int64_t l = 0; l < m; ++l) t[l] = relu_grad_weight(g[l], src[l] > threshold);
    }
    rowsum[i] = sum;
  }
}

PF_VECTOR_CLONES
void feature_rows_grad_finish(const FeatureRowParams& r, int64_t rows, int64_t d, const float* X,
                              const float* rowsum, float* dX) {
  if (!r.half_norm) return;
  const float s2 = r.data_scale * r.data_scale;
  for (int64_t i = 0; i < rows; ++i) {
    const float w = s2 * rowsum[i];
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dX[i * d + j] -= w * X[i * d + j];
  }
}

}  // namespace pf
