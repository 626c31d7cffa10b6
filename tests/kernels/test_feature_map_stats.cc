// Statistics of the random-feature kernel estimate with fixed seeds (so the
// outcome is deterministic): over many draws of W the mean of the true
// features' product exp(c_x + c_y) Phi(x).Phi(y) approaches exp(x.y) within
// 3 standard errors (positive and trigonometric features, orthogonal and iid
// projections), and orthogonal blocks give a lower mean squared error than iid
// rows at equal m.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/feature_map/feature_map.h"
#include "kernels/random_features/random_features.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

// Two already-scaled rows x, y (data_scale = 1) of norm `norm` with cosine `cosine`.
std::vector<double> pair_rows(int64_t d, double norm, double cosine, uint64_t seed) {
  std::vector<double> a = test::normal_vector(d, seed, 0), b = test::normal_vector(d, seed, 1);
  auto dot = [&](const std::vector<double>& u, const std::vector<double>& v) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += u[j] * v[j];
    return s;
  };
  const double na = std::sqrt(dot(a, a));
  for (auto& v : a) v /= na;
  const double ab = dot(a, b);
  for (int64_t j = 0; j < d; ++j) b[j] -= ab * a[j];
  const double nb = std::sqrt(dot(b, b));
  std::vector<double> xy(2 * d);
  for (int64_t j = 0; j < d; ++j) {
    xy[j] = norm * a[j];
    xy[d + j] = norm * (cosine * a[j] + std::sqrt(1 - cosine * cosine) * b[j] / nb);
  }
  return xy;
}

enum class Features { Positive, Trig };

// Kernel estimates of one pair over `draws` redraws of W.
std::vector<double> estimates(Features f, const ProjectionSpec& spec, const std::vector<double>& xy, int draws,
                              uint64_t seed) {
  const int64_t d = spec.d, m = spec.m, width = f == Features::Trig ? 2 * m : m;
  FeatureMapParams p;
  p.kernel = FeatureKernel::Softmax;
  p.data_scale = 1.0;
  std::vector<double> phi(2 * width), c(2), out(draws);
  for (int r = 0; r < draws; ++r) {
    const auto W = random_projection_f64(spec, {seed, 0, static_cast<uint64_t>(r)});
    if (f == Features::Trig)
      trig_features_forward_ref(1.0, 2, d, m, xy.data(), W.data(), phi.data(), c.data());
    else
      feature_map_forward_ref(p, 2, d, m, xy.data(), W.data(), phi.data(), c.data());
    double s = 0;
    for (int64_t l = 0; l < width; ++l) s += phi[l] * phi[width + l];
    out[r] = std::exp(c[0] + c[1]) * s;
  }
  return out;
}

TEST(FeatureMapStats, MeanOfKernelEstimateApproachesExpDot) {
  const int64_t d = 16, m = 32;
  const int draws = 1500;
  uint64_t seed = 900;
  for (Features f : {Features::Positive, Features::Trig})
    for (ProjectionKind kind : {ProjectionKind::Orthogonal, ProjectionKind::Iid})
      for (auto nc : {std::pair<double, double>{0.5, 0.3}, {1.0, -0.5}, {1.0, 0.9}}) {
        const auto xy = pair_rows(d, nc.first, nc.second, ++seed);
        const double want = std::exp(nc.first * nc.first * nc.second);
        const auto est = estimates(f, {m, d, kind, FeatureScaling::ChiNorms}, xy, draws, seed);
        double mean = 0, sq = 0;
        for (double e : est) mean += e / draws;
        for (double e : est) sq += (e - mean) * (e - mean) / (draws - 1);
        const double se = std::sqrt(sq / draws);
        EXPECT_LT(std::fabs(mean - want), 3 * se)
            << (f == Features::Trig ? "trig" : "positive") << (kind == ProjectionKind::Iid ? " iid" : " orthogonal")
            << " |x|=" << nc.first << " cos=" << nc.second << ": mean " << mean << " want " << want << " se " << se;
        EXPECT_GT(se, 0.0);
      }
}

TEST(FeatureMapStats, OrthogonalFeaturesHaveLowerErrorThanIid) {
  // Within a block the row directions are orthogonal, which makes the
  // estimates of different rows negatively correlated. Pairs with |x + y| <= 1:
  // for larger norms the squared error is so heavy-tailed that a few thousand
  // draws cannot rank the two reliably.
  const int64_t d = 16;
  const int draws = 2000;
  uint64_t seed = 950;
  double ratio_sum = 0;
  int configs = 0;
  for (int64_t m : {16, 32})
    for (auto nc : {std::pair<double, double>{0.5, 0.9}, {0.6, 0.3}, {1.0, -0.5}}) {
      const auto xy = pair_rows(d, nc.first, nc.second, ++seed);
      const double want = std::exp(nc.first * nc.first * nc.second);
      double mse[2] = {0, 0};
      int idx = 0;
      for (ProjectionKind kind : {ProjectionKind::Orthogonal, ProjectionKind::Iid}) {
        for (double e : estimates(Features::Positive, {m, d, kind, FeatureScaling::ChiNorms}, xy, draws, seed))
          mse[idx] += (e - want) * (e - want) / draws;
        ++idx;
      }
      EXPECT_LT(mse[0], mse[1]) << "m=" << m << " |x|=" << nc.first << " cos=" << nc.second;
      ratio_sum += mse[0] / mse[1];
      ++configs;
    }
  EXPECT_LT(ratio_sum / configs, 0.95) << "mean MSE ratio orthogonal / iid";
}

}  // namespace
}  // namespace pf
