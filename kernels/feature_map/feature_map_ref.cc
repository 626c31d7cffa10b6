// float64 reference of the feature maps (feature_map.h): plain loops, no BLAS.
//   X [n, d], W [m, d] -> Phi [n, m] (trig: [n, 2m]), log_scale [n]; dPhi [n, m] -> dX [n, d]
#include <cmath>
#include <vector>

#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"
#include "runtime/check.h"

namespace pf {
namespace {

// x = s * X[i, :]; returns u_l = w_l . x into u [m] and |x|^2 / 2.
double project_row(double s, int64_t d, int64_t m, const double* row, const double* W, double* x, double* u) {
  double sq = 0;
  for (int64_t j = 0; j < d; ++j) {
    x[j] = s * row[j];
    sq += x[j] * x[j];
  }
  for (int64_t l = 0; l < m; ++l) {
    double acc = 0;
    for (int64_t j = 0; j < d; ++j) acc += W[l * d + j] * x[j];
    u[l] = acc;
  }
  return 0.5 * sq;
}

}  // namespace

void feature_map_forward_ref(const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const double* X,
                             const double* W, double* Phi, double* log_scale) {
  check_feature_map_args("feature_map_forward_ref", p, n, d, m);
  std::vector<double> x(static_cast<size_t>(d)), u(static_cast<size_t>(m));
  const double inv_sqrt_m = 1.0 / std::sqrt(static_cast<double>(m));
  const double half_norm = feature_subtracts_half_norm(p) ? 1.0 : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double h = half_norm * project_row(p.data_scale, d, m, X + i * d, W, x.data(), u.data());
    double* out = Phi + i * m;
    double c = 0;
    if (feature_is_exponential(p)) {
      c = -INFINITY;
      for (int64_t l = 0; l < m; ++l) c = std::fmax(c, favor_exponent(u[l], h));
      for (int64_t l = 0; l < m; ++l) out[l] = favor_feature(favor_exponent(u[l], h), c, inv_sqrt_m);
    } else if (p.kernel == FeatureKernel::Elu) {
      for (int64_t l = 0; l < m; ++l) out[l] = elu_feature(u[l]);
    } else {
      for (int64_t l = 0; l < m; ++l) out[l] = relu_feature(u[l], p.relu_eps);
    }
    if (log_scale) log_scale[i] = c;
  }
}

void feature_map_backward_ref(const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const double* X,
                              const double* W, const double* Phi, const double* dPhi, double* dX, double* dW) {
  check_feature_map_args("feature_map_backward_ref", p, n, d, m);
  std::vector<double> x(static_cast<size_t>(d)), u(static_cast<size_t>(m)), phi(static_cast<size_t>(m)),
      t(static_cast<size_t>(m));
  const double inv_sqrt_m = 1.0 / std::sqrt(static_cast<double>(m));
  const double half_norm = feature_subtracts_half_norm(p) ? 1.0 : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double h = half_norm * project_row(p.data_scale, d, m, X + i * d, W, x.data(), u.data());
    const double* g = dPhi + i * m;
    double tsum = 0;
    if (feature_is_exponential(p)) {
      if (Phi) {
        for (int64_t l = 0; l < m; ++l) phi[l] = Phi[i * m + l];
      } else {
        double c = -INFINITY;
        for (int64_t l = 0; l < m; ++l) c = std::fmax(c, favor_exponent(u[l], h));
        for (int64_t l = 0; l < m; ++l) phi[l] = favor_feature(favor_exponent(u[l], h), c, inv_sqrt_m);
      }
      for (int64_t l = 0; l < m; ++l) {
        t[l] = favor_grad_weight(g[l], phi[l]);
        tsum += t[l];
      }
    } else if (p.kernel == FeatureKernel::Elu) {
      for (int64_t l = 0; l < m; ++l) t[l] = elu_grad_weight(g[l], Phi ? Phi[i * m + l] : elu_feature(u[l]));
    } else {
      for (int64_t l = 0; l < m; ++l) t[l] = relu_grad_weight(g[l], Phi ? Phi[i * m + l] > p.relu_eps : u[l] > 0.0);
    }
    for (int64_t j = 0; j < d; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < m; ++l) acc += t[l] * W[l * d + j];
      dX[i * d + j] = p.data_scale * (acc - half_norm * x[j] * tsum);
    }
    // u_l = w_l . x with x = s X_i: du_l / dW[l, j] = x_j.
    if (dW)
      for (int64_t l = 0; l < m; ++l)
        for (int64_t j = 0; j < d; ++j) dW[l * d + j] += t[l] * x[j];
  }
}

void trig_features_forward_ref(double data_scale, int64_t n, int64_t d, int64_t m, const double* X, const double* W,
                               double* Phi, double* log_scale) {
  FeatureMapParams p;
  p.data_scale = data_scale;
  check_feature_map_args("trig_features_forward_ref", p, n, d, m);
  std::vector<double> x(static_cast<size_t>(d)), u(static_cast<size_t>(m));
  const double inv_sqrt_m = 1.0 / std::sqrt(static_cast<double>(m));
  for (int64_t i = 0; i < n; ++i) {
    const double h = project_row(data_scale, d, m, X + i * d, W, x.data(), u.data());
    for (int64_t l = 0; l < m; ++l) {
      Phi[i * 2 * m + l] = inv_sqrt_m * std::sin(u[l]);
      Phi[i * 2 * m + m + l] = inv_sqrt_m * std::cos(u[l]);
    }
    if (log_scale) log_scale[i] = h;
  }
}

}  // namespace pf
