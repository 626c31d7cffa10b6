// Random projection W [m, d]: determinism from (seed, layer, redraw), exact
// orthogonality inside blocks, row-norm laws, partial last blocks, errors, and
// the Householder QR it is built on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/random_features/random_features.h"
#include "runtime/errors.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

ProjectionSpec spec(int64_t m, int64_t d, ProjectionKind kind, FeatureScaling scaling) {
  ProjectionSpec s;
  s.m = m;
  s.d = d;
  s.kind = kind;
  s.scaling = scaling;
  return s;
}

const ProjectionKind kKinds[] = {ProjectionKind::Orthogonal, ProjectionKind::Iid};
const FeatureScaling kScalings[] = {FeatureScaling::ChiNorms, FeatureScaling::SqrtD};

TEST(RandomFeatures, SameKeysGiveIdenticalBitsOtherKeysDiffer) {
  for (ProjectionKind kind : kKinds)
    for (FeatureScaling sc : kScalings) {
      const ProjectionSpec s = spec(100, 64, kind, sc);
      const ProjectionKey key{11, 3, 7};
      const auto a = random_projection_f64(s, key), b = random_projection_f64(s, key);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double)));
      const auto f = random_projection_f32(s, key);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(f[i], static_cast<float>(a[i]));
      for (ProjectionKey other : {ProjectionKey{11, 3, 8}, ProjectionKey{11, 4, 7}, ProjectionKey{12, 3, 7}}) {
        const auto c = random_projection_f64(s, other);
        int64_t same = 0;
        for (size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
        EXPECT_EQ(same, 0) << "key (" << other.seed << "," << other.layer << "," << other.redraw << ")";
      }
    }
}

TEST(RandomFeatures, BlockRowsAreOrthogonalInFloat64) {
  for (FeatureScaling sc : kScalings)
    for (auto md : {std::pair<int64_t, int64_t>{100, 64}, {256, 64}, {16, 64}, {50, 16}, {7, 3}}) {
      const int64_t m = md.first, d = md.second;
      const auto W = random_projection_f64(spec(m, d, ProjectionKind::Orthogonal, sc), {5, 1, 2});
      std::vector<double> norms(m);
      for (int64_t r = 0; r < m; ++r) norms[r] = std::sqrt(dot_f64_ref(&W[r * d], &W[r * d], d));
      double max_in_block = 0, max_across = 0;
      for (int64_t a = 0; a < m; ++a)
        for (int64_t b = 0; b < a; ++b) {
          const double cosine = dot_f64_ref(&W[a * d], &W[b * d], d) / (norms[a] * norms[b]);
          if (a / d == b / d)
            max_in_block = std::max(max_in_block, std::fabs(cosine));
          else
            max_across = std::max(max_across, std::fabs(cosine));
        }
      EXPECT_LT(max_in_block, 1e-12) << "m=" << m << " d=" << d;
      // Rows of different blocks are independent, hence not orthogonal.
      if (m > d) {
        EXPECT_GT(max_across, 1e-3) << "m=" << m << " d=" << d;
      }
    }
}

TEST(RandomFeatures, SqrtDNormsAreExact) {
  for (ProjectionKind kind : kKinds) {
    const int64_t m = 100, d = 64;
    const auto W = random_projection_f64(spec(m, d, kind, FeatureScaling::SqrtD), {1, 2, 3});
    for (int64_t r = 0; r < m; ++r) EXPECT_NEAR(std::sqrt(dot_f64_ref(&W[r * d], &W[r * d], d)), 8.0, 1e-13);
  }
}

TEST(RandomFeatures, ChiNormsFollowChiD) {
  // E[chi(d)] = sqrt(2) Gamma((d+1)/2) / Gamma(d/2), Var = d - E^2.
  for (ProjectionKind kind : kKinds)
    for (int64_t d : {16, 64}) {
      const int64_t m = 2000;
      const auto W = random_projection_f64(spec(m, d, kind, FeatureScaling::ChiNorms), {9, 0, 1});
      const double mu = std::sqrt(2.0) * std::exp(std::lgamma((d + 1) / 2.0) - std::lgamma(d / 2.0));
      const double var = d - mu * mu;
      double mean = 0, m2 = 0;
      for (int64_t r = 0; r < m; ++r) {
        const double nr = std::sqrt(dot_f64_ref(&W[r * d], &W[r * d], d));
        mean += nr / m;
        m2 += nr * nr / m;
      }
      const double se = std::sqrt(var / m);
      EXPECT_LT(std::fabs(mean - mu), 3 * se) << "d=" << d << " mean " << mean << " want " << mu;
      EXPECT_NEAR(m2 - mean * mean, var, 0.15 * var) << "d=" << d;
    }
}

TEST(RandomFeatures, PartialLastBlockAndPrefixProperty) {
  // m = 16 < d and m = 100 = 64 + 36: the first rows of every size agree,
  // since block b and row norms are keyed by block and row, not by m.
  for (ProjectionKind kind : kKinds)
    for (FeatureScaling sc : kScalings) {
      const ProjectionKey key{3, 1, 4};
      const auto big = random_projection_f64(spec(128, 64, kind, sc), key);
      for (int64_t m : {16, 100}) {
        const auto W = random_projection_f64(spec(m, 64, kind, sc), key);
        ASSERT_EQ(W.size(), static_cast<size_t>(m * 64));
        for (size_t i = 0; i < W.size(); ++i) {
          ASSERT_TRUE(std::isfinite(W[i]));
          ASSERT_EQ(W[i], big[i]) << "m=" << m << " element " << i;
        }
      }
    }
}

TEST(RandomFeatures, RejectsNonPositiveSizes) {
  for (auto md : {std::pair<int64_t, int64_t>{0, 4}, {-1, 4}, {4, 0}, {4, -2}}) {
    EXPECT_THROW(random_projection_f64(spec(md.first, md.second, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms),
                                       {1, 0, 0}),
                 ValueError);
    EXPECT_THROW(
        random_projection_f32(spec(md.first, md.second, ProjectionKind::Iid, FeatureScaling::SqrtD), {1, 0, 0}),
        ValueError);
  }
  double q = 0;
  EXPECT_THROW(householder_qr(0, &q, &q, nullptr), ValueError);
}

void check_qr(int64_t d, const std::vector<double>& A) {
  std::vector<double> Q(d * d), R(d * d);
  householder_qr(d, A.data(), Q.data(), R.data());
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double qr = 0, qtq = 0;
      for (int64_t k = 0; k < d; ++k) {
        qr += Q[i * d + k] * R[k * d + j];
        qtq += Q[k * d + i] * Q[k * d + j];
      }
      EXPECT_NEAR(qr, A[i * d + j], 1e-12 * (1 + std::fabs(A[i * d + j]))) << "d=" << d << " (" << i << "," << j << ")";
      EXPECT_NEAR(qtq, i == j ? 1.0 : 0.0, 1e-13) << "d=" << d;
      if (i > j) {
        EXPECT_EQ(R[i * d + j], 0.0);
      }
      if (i == j) {
        EXPECT_GE(R[i * d + j], 0.0);
      }
    }
}

TEST(HouseholderQr, FactorsGaussianAndDegenerateMatrices) {
  for (int64_t d : {1, 2, 7, 64}) check_qr(d, test::normal_vector(d * d, 21, static_cast<uint64_t>(d)));
  check_qr(5, std::vector<double>(25, 0.0));  // every reflector is the identity
  std::vector<double> A = test::normal_vector(16, 22);
  for (int64_t i = 0; i < 4; ++i) A[i * 4 + 1] = 2 * A[i * 4];  // rank-deficient
  check_qr(4, A);
}

}  // namespace
}  // namespace pf
