// Random projection matrix W [m, d] (row-major) for FAVOR+ random features.
//
//   Orthogonal: ceil(m/d) independent d x d Gaussian blocks, each replaced by
//               the orthogonal factor of its QR decomposition (Householder,
//               float64, sign-corrected so that it is Haar-distributed); the
//               rows of the blocks are stacked and the last block contributes
//               only its first m - d*floor(m/d) rows. Rows inside one block are
//               exactly orthogonal; rows of different blocks are independent.
//   Iid:        every entry an independent standard normal.
//   Row norms:  ChiNorms gives each row the norm of a fresh d-dim Gaussian
//               vector (chi(d)-distributed), so every row is marginally an
//               N(0, I_d) draw; SqrtD gives every row norm exactly sqrt(d).
//               For Iid, ChiNorms keeps the rows as drawn (their norms already
//               are chi(d)-distributed).
//
// W is a function of (seed, layer, redraw index) only, drawn from
// runtime/random.h KeyedRandom: every rank and backend computes bit-identical
// matrices with no communication. Generation runs on the host; CUDA callers
// copy the float32 result to the device (copy_bytes).
#pragma once

#include <cstdint>
#include <vector>

namespace pf {

enum class ProjectionKind { Orthogonal, Iid };
enum class FeatureScaling { ChiNorms, SqrtD };

struct ProjectionSpec {
  int64_t m = 0;  // number of random features (rows of W)
  int64_t d = 0;  // head dimension (columns of W)
  ProjectionKind kind = ProjectionKind::Orthogonal;
  FeatureScaling scaling = FeatureScaling::ChiNorms;
};

// Where a matrix comes from: the run seed, the layer, and how many times the
// features of that layer have been redrawn.
struct ProjectionKey {
  uint64_t seed = 0;
  uint64_t layer = 0;
  uint64_t redraw = 0;
};

// Writes W [spec.m, spec.d] row-major into `W` (spec.m * spec.d elements).
// Throws ValueError when m <= 0 or d <= 0.
void random_projection_f64(const ProjectionSpec& spec, const ProjectionKey& key, double* W);
// The float64 matrix rounded to float32 (identical rounding everywhere).
void random_projection_f32(const ProjectionSpec& spec, const ProjectionKey& key, float* W);
// Convenience owners of the same matrices.
std::vector<double> random_projection_f64(const ProjectionSpec& spec, const ProjectionKey& key);
std::vector<float> random_projection_f32(const ProjectionSpec& spec, const ProjectionKey& key);

// Householder QR of a square A [d, d] (row-major, float64): A = Q R with Q
// orthogonal and R upper triangular with a non-negative diagonal (the signs are
// moved into Q, which makes Q Haar-distributed for Gaussian A). Q and R are
// [d, d] row-major; R may be nullptr. Throws ValueError when d <= 0.
void householder_qr(int64_t d, const double* A, double* Q, double* R);

}  // namespace pf
