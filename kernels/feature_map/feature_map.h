// Random-feature maps of attention queries and keys, per row of X [n, d]
// (n rows of one head, or n = B*H*N rows when all of them share W):
//   W   [m, d]  random projection (kernels/random_features), row-major
//   Phi [n, m]  features, row-major
//   log_scale [n]  per-row log-scale c_i: the true feature row is exp(c_i) * Phi[i, :]
//   x_i = data_scale * X[i, :]   (data_scale = d^(-1/4) by default)
//
// Softmax (FAVOR+ positive features, Choromanski et al. 2021):
//   e_il = w_l . x_i - |x_i|^2 / 2,  c_i = max_l e_il,
//   Phi[i, l] = m^(-1/2) exp(e_il - c_i)        in [0, m^(-1/2)], max attained
//   E_W[ exp(c_x) Phi(x) . exp(c_y) Phi(y) ] = exp(x . y)
//   No exponent can overflow for any input norm. The consumer (linear
//   attention) handles the scales: query scales cancel in the normalised
//   output, key scales are combined with a running log-scale as in online
//   softmax, so no max over all keys and no additive epsilon are needed.
// Exp (the trained-projection map of the exp linear attention): as Softmax,
//   with W trained instead of drawn and the |x_i|^2 / 2 term only when
//   FeatureMapParams::half_norm: e_il = w_l . x_i [- |x_i|^2 / 2]. Without the
//   term the map is exp(W x - c) (docs/kernels/features.md#exp); with it and
//   W the FAVOR+ draw it equals Softmax exactly.
// Relu (generalized kernel): Phi[i, l] = relu(w_l . x_i) + eps, c_i = 0.
// Elu (the linear-attention baseline elu(x) + 1 of Katharopoulos et al. 2020):
//   Phi[i, l] = elu(u_il) + 1 with u_il = w_l . x_i (u + 1 for u > 0, exp(u)
//   otherwise), c_i = 0. The model runs it with W = I (m = d) and
//   data_scale = 1, i.e. on the raw q and k rows.
//
// Backward, with c held constant (exact: the true features exp(c) Phi do not
// depend on c, so a consumer that treats c as a constant input and returns
// G = dL/dPhi gets the true gradient):
//   Softmax: dx = W^T (G . Phi) - x * sum_l (G . Phi)_l   (Exp: the second term
//            only with half_norm)
//   Relu:    dx = W^T (G . 1[w.x > 0])
//   Elu:     dx = W^T (G . elu'(w.x)),  elu'(u) = 1 (u > 0), exp(u) = Phi (u <= 0)
//   dX[i, :] = data_scale * dx_i     (overwritten, not accumulated)
// With respect to W (when dW is not nullptr; the map is u = s X W^T):
//   dW [m, d] += s T^T X with the same weights T = dx's (G . Phi, the Relu mask, ...)
// When Phi is nullptr the backward recomputes it (one GEMM); given Phi, the
// Relu mask is Phi > eps (identical to w.x > 0 up to the rounding of
// relu(u) + eps; exact for eps = 0), recomputing uses w.x > 0.
//
// Backends: float64 reference (_ref, plain loops), CPU (_cpu: X W^T by
// gemm_f32_cpu, per-row exp/max with OpenMP, on ctx.stream), CUDA (_cuda:
// cuBLAS GEMM plus a row kernel on ctx.stream; fp32 math; also fp16/bf16 storage). All pointers live on
// ctx.device; temporaries are recorded in ctx.tracker (required on CUDA), and
// CUDA calls that use temporaries synchronise ctx.stream before freeing them.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/exec.h"

namespace pf {

enum class FeatureKernel { Softmax, Relu, Elu, Exp };

struct FeatureMapParams {
  FeatureKernel kernel = FeatureKernel::Softmax;
  double data_scale = 1.0;  // x = data_scale * row
  double relu_eps = 1e-3;   // Relu only
  bool half_norm = false;   // Exp only: subtract |x|^2 / 2 (Softmax always does)
};

// The usual parameters for head dimension d: data_scale = d^(-1/4) (Elu: 1),
// eps = 1e-3 (Relu), half_norm = false (Exp).
FeatureMapParams default_feature_params(FeatureKernel kernel, int64_t d);
const char* feature_kernel_name(FeatureKernel kernel);
// Whether the map is exponential (Softmax, Exp) and whether it subtracts
// |x|^2 / 2 (Softmax; Exp with half_norm).
bool feature_is_exponential(const FeatureMapParams& p);
bool feature_subtracts_half_norm(const FeatureMapParams& p);

// One declaration list for the dispatcher (no suffix) and each backend
// (_cpu, _cuda). The forward: log_scale may be nullptr (callers that do not
// need it, e.g. queries); it is written as 0 for Relu and Elu. The backward:
// dPhi [n, m] (same scaling as Phi); Phi may be nullptr (recomputed); dX
// [n, d]; dW [m, d] accumulated (+=) when not nullptr. The dispatchers
// dispatch on ctx.device.
#define PF_FEATURE_MAP_DECLS(SUFFIX)                                                                                   \
  void feature_map_forward##SUFFIX(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, \
                                   const float* X, const float* W, float* Phi, float* log_scale);                      \
  void feature_map_backward##SUFFIX(const ExecContext& ctx, const FeatureMapParams& p, int64_t n, int64_t d,           \
                                    int64_t m, const float* X, const float* W, const float* Phi, const float* dPhi,    \
                                    float* dX, float* dW = nullptr);
// Reduced-precision storage: X, Phi, dPhi and dX hold `storage` values
// (DType::f32, f16 or bf16); W and log_scale stay fp32, and the GEMMs,
// exponentials and sums run in fp32 (X is widened chunk by chunk into fp32
// scratch, results are rounded once). f16/bf16 run on CUDA only; the
// dispatchers throw ValueError for them on the CPU.
#define PF_FEATURE_MAP_STORAGE_DECLS(SUFFIX)                                                                          \
  void feature_map_forward##SUFFIX(const ExecContext& ctx, const FeatureMapParams& p, DType storage, int64_t n,       \
                                   int64_t d, int64_t m, const void* X, const float* W, void* Phi, float* log_scale); \
  void feature_map_backward##SUFFIX(const ExecContext& ctx, const FeatureMapParams& p, DType storage, int64_t n,      \
                                    int64_t d, int64_t m, const void* X, const float* W, const void* Phi,             \
                                    const void* dPhi, void* dX);
PF_FEATURE_MAP_DECLS()
PF_FEATURE_MAP_DECLS(_cpu)
PF_FEATURE_MAP_DECLS(_cuda)
PF_FEATURE_MAP_STORAGE_DECLS()
PF_FEATURE_MAP_STORAGE_DECLS(_cuda)

// float64 reference, plain loops, host memory.
void feature_map_forward_ref(const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const double* X,
                             const double* W, double* Phi, double* log_scale);
void feature_map_backward_ref(const FeatureMapParams& p, int64_t n, int64_t d, int64_t m, const double* X,
                              const double* W, const double* Phi, const double* dPhi, double* dX,
                              double* dW = nullptr);

// ANALYSIS ONLY (approximation studies; not used in training, no backward, CPU
// only, on ctx.stream): trigonometric random features of the softmax kernel,
//   Phi[i, l] = m^(-1/2) sin(w_l . x_i),  Phi[i, m + l] = m^(-1/2) cos(w_l . x_i),
//   log_scale[i] = |x_i|^2 / 2,  Phi [n, 2m],
// so E_W[ exp(c_x + c_y) Phi(x) . Phi(y) ] = exp(x . y) as well, but the
// estimate takes negative values and its variance does not vanish as x.y -> -inf.
void trig_features_forward(const ExecContext& ctx, double data_scale, int64_t n, int64_t d, int64_t m, const float* X,
                           const float* W, float* Phi, float* log_scale);
void trig_features_forward_ref(double data_scale, int64_t n, int64_t d, int64_t m, const double* X, const double* W,
                               double* Phi, double* log_scale);

// Shared argument checks (ValueError naming the op and the shapes).
void check_feature_map_args(const char* op, const FeatureMapParams& p, int64_t n, int64_t d, int64_t m);

}  // namespace pf
