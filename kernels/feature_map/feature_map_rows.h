// Host row loops of the feature maps (feature_map.h), fp32, single-threaded,
// shared by the CPU feature-map kernels (which run them over OpenMP row
// blocks) and the fused FAVOR+ kernels (which run them on one chunk of one
// head in cache), so that both make bit-identical features from the same U.
//   U = data_scale * X W^T   [rows, m]  (a GEMM by the caller)
//   feature_rows_finish:  U -> Phi (in place) and the log-scales c
//   feature_rows_grad:    T = dPhi . Phi (or the Relu mask) and its row sums;
//                         then the caller forms dX = data_scale * T W and
//                         feature_rows_grad_finish subtracts s^2 rowsum_i X_i.
// The loops are compiled for AVX-512, AVX2 and the baseline, picked by the
// CPU at run time (GCC function multiversioning), so the exponentials of
// fm_exp_nonpos run 16 or 8 lanes wide where the CPU allows.
#pragma once

#include <cstdint>

#include "kernels/feature_map/feature_map.h"

namespace pf {

// Per-call constants of the row loops.
struct FeatureRowParams {
  float data_scale;
  float inv_sqrt_m;
  float eps;
  bool softmax;    // exponential features (Softmax, Exp)
  bool half_norm;  // ... minus |x|^2 / 2 (Softmax; Exp with half_norm)
  bool elu;
  explicit FeatureRowParams(const FeatureMapParams& p, int64_t m);
};

// Rows [0, rows) of U (row stride m, in Phi) become features; c[i] = the row
// log-scale (0 for Relu) when c is not null. X is [rows, d] (row stride d).
void feature_rows_finish(const FeatureRowParams& r, int64_t rows, int64_t d, int64_t m, const float* X, float* Phi,
                         float* c);
// T[i, :] = dPhi . Phi (softmax, exp), dPhi . [active] (relu: Phi > eps when
// `phi_is_features`, else U > 0) or dPhi . elu'(U) (elu: from Phi when
// `phi_is_features`, else from U), rowsum[i] = sum_l T[i, l] (half_norm only).
void feature_rows_grad(const FeatureRowParams& r, int64_t rows, int64_t m, const float* dPhi, const float* Phi,
                       bool phi_is_features, float* T, float* rowsum);
// dX[i, :] -= s^2 rowsum[i] X[i, :]   (half_norm only; a no-op otherwise).
void feature_rows_grad_finish(const FeatureRowParams& r, int64_t rows, int64_t d, const float* X,
                              const float* rowsum, float* dX);

}  // namespace pf
