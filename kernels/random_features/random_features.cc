// Host-side generation of the random projection W [m, d] (see
// random_features.h) and the Householder QR it uses for orthogonal blocks.
// Draw layout (all from KeyedRandom(seed, layer, redraw)):
//   stream 0: Gaussian entries; element t = block*d*d + i*d + j for orthogonal
//             blocks, t = row*d + j for iid rows;
//   stream 1: the d normals whose norm gives row `row` its chi(d) length,
//             element t = row*d + k.
// Element t of a stream is half of Philox draw (stream << 60 | t / 2), so the
// matrix depends only on the key, m, d, the kind and the scaling.
#include "kernels/random_features/random_features.h"

#include <algorithm>
#include <cmath>

#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {
namespace {

constexpr uint64_t kEntryStream = 0;
constexpr uint64_t kNormStream = 1;

double normal_at(const KeyedRandom& rng, uint64_t stream, uint64_t t) {
  double z0, z1;
  rng.normal2((stream << 60) | (t >> 1), &z0, &z1);
  return (t & 1) ? z1 : z0;
}

// Norm of d fresh standard normals: a chi(d) draw for row `row`.
double chi_norm(const KeyedRandom& rng, int64_t d, int64_t row) {
  double s = 0;
  for (int64_t k = 0; k < d; ++k) {
    const double z = normal_at(rng, kNormStream, static_cast<uint64_t>(row * d + k));
    s += z * z;
  }
  return std::sqrt(s);
}

void check_spec(const ProjectionSpec& spec) {
  PF_REQUIRE(ValueError, spec.m > 0 && spec.d > 0,
             "random projection needs m > 0 and d > 0, got m=" << spec.m << " d=" << spec.d);
}

}  // namespace

void householder_qr(int64_t d, const double* A, double* Q, double* R) {
  PF_REQUIRE(ValueError, d > 0, "householder_qr needs d > 0, got d=" << d);
  const size_t dd = static_cast<size_t>(d);
  std::vector<double> work(A, A + dd * dd);  // becomes R
  std::vector<double> vs(dd * dd, 0.0);      // Householder vector k in row k, entries k..d-1
  std::vector<double> vnorm2(dd, 0.0);       // |v_k|^2; 0 means H_k = I
  for (int64_t k = 0; k < d; ++k) {
    double norm2 = 0;
    for (int64_t i = k; i < d; ++i) norm2 += work[i * d + k] * work[i * d + k];
    const double norm = std::sqrt(norm2);
    const double x0 = work[k * d + k];
    const double alpha = x0 >= 0 ? -norm : norm;  // reflect onto -sign(x0)|x| e_1: no cancellation
    double* v = &vs[k * d];
    for (int64_t i = k; i < d; ++i) v[i] = work[i * d + k];
    v[k] -= alpha;
    double vn2 = 0;
    for (int64_t i = k; i < d; ++i) vn2 += v[i] * v[i];
    vnorm2[k] = vn2;
    if (vn2 == 0) continue;
    for (int64_t j = k; j < d; ++j) {
      double s = 0;
      for (int64_t i = k; i < d; ++i) s += v[i] * work[i * d + j];
      const double f = 2.0 * s / vn2;
      for (int64_t i = k; i < d; ++i) work[i * d + j] -= f * v[i];
    }
    work[k * d + k] = alpha;
    for (int64_t i = k + 1; i < d; ++i) work[i * d + k] = 0.0;
  }
  // Q = H_0 H_1 ... H_{d-1}, applied to the identity from the right end.
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) Q[i * d + j] = i == j ? 1.0 : 0.0;
  for (int64_t k = d - 1; k >= 0; --k) {
    if (vnorm2[k] == 0) continue;
    const double* v = &vs[k * d];
    for (int64_t j = 0; j < d; ++j) {
      double s = 0;
      for (int64_t i = k; i < d; ++i) s += v[i] * Q[i * d + j];
      const double f = 2.0 * s / vnorm2[k];
      for (int64_t i = k; i < d; ++i) Q[i * d + j] -= f * v[i];
    }
  }
  // Move the signs of diag(R) into Q: Q' = Q D, R' = D R with D = sign(diag R).
  for (int64_t k = 0; k < d; ++k) {
    if (work[k * d + k] >= 0) continue;
    for (int64_t i = 0; i < d; ++i) Q[i * d + k] = -Q[i * d + k];
    for (int64_t j = 0; j < d; ++j) work[k * d + j] = -work[k * d + j];
  }
  if (R != nullptr)
    for (size_t i = 0; i < dd * dd; ++i) R[i] = work[i];
}

void random_projection_f64(const ProjectionSpec& spec, const ProjectionKey& key, double* W) {
  check_spec(spec);
  const int64_t m = spec.m, d = spec.d;
  const KeyedRandom rng(key.seed, key.layer, key.redraw);
  if (spec.kind == ProjectionKind::Iid) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < d; ++j) W[r * d + j] = normal_at(rng, kEntryStream, static_cast<uint64_t>(r * d + j));
  } else {
    const int64_t blocks = (m + d - 1) / d;
    std::vector<double> G(static_cast<size_t>(d * d)), Q(static_cast<size_t>(d * d));
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t t = 0; t < d * d; ++t) G[t] = normal_at(rng, kEntryStream, static_cast<uint64_t>(b * d * d + t));
      householder_qr(d, G.data(), Q.data(), nullptr);
      // Rows of the block are the columns of Q (rows of Q^T).
      const int64_t rows = std::min(d, m - b * d);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < d; ++j) W[(b * d + r) * d + j] = Q[j * d + r];
    }
  }
  // Row lengths. An iid row with ChiNorms keeps its drawn length.
  if (spec.kind == ProjectionKind::Iid && spec.scaling == FeatureScaling::ChiNorms) return;
  for (int64_t r = 0; r < m; ++r) {
    double norm2 = 0;
    for (int64_t j = 0; j < d; ++j) norm2 += W[r * d + j] * W[r * d + j];
    const double target =
        spec.scaling == FeatureScaling::SqrtD ? std::sqrt(static_cast<double>(d)) : chi_norm(rng, d, r);
    const double f = target / std::sqrt(norm2);
    for (int64_t j = 0; j < d; ++j) W[r * d + j] *= f;
  }
}

void random_projection_f32(const ProjectionSpec& spec, const ProjectionKey& key, float* W) {
  const std::vector<double> w = random_projection_f64(spec, key);
  for (size_t i = 0; i < w.size(); ++i) W[i] = static_cast<float>(w[i]);
}

std::vector<double> random_projection_f64(const ProjectionSpec& spec, const ProjectionKey& key) {
  check_spec(spec);
  std::vector<double> W(static_cast<size_t>(spec.m * spec.d));
  random_projection_f64(spec, key, W.data());
  return W;
}

std::vector<float> random_projection_f32(const ProjectionSpec& spec, const ProjectionKey& key) {
  check_spec(spec);
  std::vector<float> W(static_cast<size_t>(spec.m * spec.d));
  random_projection_f32(spec, key, W.data());
  return W;
}

}  // namespace pf
