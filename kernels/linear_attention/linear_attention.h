// Causal and bidirectional linear attention over precomputed features, forward
// and backward, batched over `heads` = B*H independent heads.
//
// Per head (row-major fp32, heads stacked contiguously):
//   phi_q, phi_k  [n, m]   scaled features, entries in [0, m^-1/2]
//   c_k           [n]      key log-scales: the true key feature is exp(c_k[j]) * phi_k[j]
//                          (query log-scales cancel in the normalised output and are not taken)
//   v             [n, d]   values;  V' = [V 1] is [n, d+1]
//   y             [n, d+1] unnormalised result [num, den] at the log-scale row_scale[i]
//   row_scale     [n]      L_i = max of the key log-scales seen by row i (nondecreasing)
//   o             [n, d]   normalised output num / max(den, kDenominatorGuard)
//   den           [n]      the denominator at log-scale row_scale (kept for the backward)
//   state         [1 + m*(d+1)]  packed (log-scale a, S [m, d+1]) meaning exp(a) * S
//
// A forward state is S' = sum_j exp(c_k[j]) phi_k[j] V'_j^T. A backward (gradient)
// state is R = sum_i exp(-L_i) phi_q[i] G_i^T with
//   G_i = [dO_i / den_i, -(dO_i . o_i) / den_i]   (den_i at log-scale L_i).
// States combine like online softmax:
//   (a, S) (+) (b, T) = (M, exp(a-M) S + exp(b-M) T),  M = max(a, b).
// The empty state is (kEmptyLogScale, 0), the identity of the combine.
// Every exponent the kernels evaluate is <= 0, so nothing overflows whatever
// the log-scales are; see docs/kernels/linear-attention.md for the derivation.
//
// Sequence-parallel protocol (causal), per layer; rank r holds block B_r:
//   forward:  causal_linear_attention_forward_local -> y, row_scale, T_r
//             exclusive scan of T_r with linear_attention_state_combine -> Pre_r
//             linear_attention_add_prefix(Pre_r)      (one GEMM per row block)
//             linear_attention_normalize              -> o, den
//   backward: causal_linear_attention_backward_local -> dphi (local parts), U_r
//             reverse exclusive scan of U_r            -> Suf_r
//             linear_attention_backward_add_prefix(Pre_r)  -> dphi_q
//             linear_attention_backward_add_suffix(Suf_r)  -> dphi_k, dv
// Gradients are with respect to phi_q, phi_k (the scaled features, c_k held
// constant) and v; they are written (not accumulated) by the *_local and
// bidirectional functions and accumulated by the add_* functions.
//
// Storage types: every entry point below except the state functions has an
// overload taking `DType storage` (f32 on every backend; f16, bf16 on CUDA
// only, ValueError naming the dtype on the CPU) for phi_q, phi_k, v, o, d_o,
// d_phi_q, d_phi_k, d_v. c_k, y, row_scale, den and all states stay fp32.
// f16/bf16 on CUDA are staged: each low-precision input is widened into an
// fp32 device temporary (recorded in ctx.tracker), the fp32 kernels run, and
// the outputs are rounded once back to the storage type (the add_* functions
// widen, accumulate in fp32 and round again); ctx.stream is synchronised
// before the temporaries are freed. So every GEMM, exponential and sum is fp32.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/exec.h"

namespace pf {

// Log-scale of the empty state; finite so that no inf - inf is ever formed.
constexpr float kEmptyLogScale = -1e30f;
// den is a sum of nonnegative terms; outputs divide by max(den, kDenominatorGuard).
constexpr float kDenominatorGuard = 1e-30f;

struct LinAttnShape {
  int64_t heads = 1;   // B*H
  int64_t n = 0;       // positions in this block
  int64_t m = 0;       // features
  int64_t d = 0;       // head dim
  int64_t chunk = 64;  // chunk size C of the causal kernels (any n; C need not divide n)
  int64_t state_size() const { return 1 + m * (d + 1); }
};

// ---- states -------------------------------------------------------------------
// states [heads][state_size]: sets every head to the empty state.
void linear_attention_state_clear(const ExecContext& ctx, const LinAttnShape& s, float* states);
// out = earlier (+) later, per head. `out` may alias either input. Associative.
void linear_attention_state_combine(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d, const float* earlier,
                                    const float* later, float* out);

// Segmented states [heads][1 + state_size]: a flag (0 or 1: "a segment
// starts here") before each state, the values of runtime/scan.h's segmented
// combine of the state combine, with the select inside the combine (no scratch):
//   (A, f) (+) (B, h) = (h ? B : A (+) B, f or h).
// Clear: every flag 0 and every state empty. `out` may alias either input.
void linear_attention_segmented_state_clear(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d, float* states);
void linear_attention_segmented_state_combine(const ExecContext& ctx, int64_t heads, int64_t m, int64_t d,
                                              const float* earlier, const float* later, float* out);

// ---- causal forward -------------------------------------------------------------
// y, row_scale from this block only (zero initial state) and the block total T.
// With initial_state != nullptr, its contribution is added as by
// linear_attention_add_prefix; block_total stays the sum over this block.
void causal_linear_attention_forward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                           const float* phi_k, const float* c_k, const float* v, float* y,
                                           float* row_scale, float* block_total, const float* initial_state);
// y_i (+)= phi_q[i] @ prefix, rescaled: row_scale_i <- max(row_scale_i, a_prefix).
// Also the bidirectional finish (on a cleared y, see below).
void linear_attention_add_prefix(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q, const float* prefix,
                                 float* y, float* row_scale);
// o = y[:, :d] / max(y[:, d], kDenominatorGuard), den = y[:, d].
void linear_attention_normalize(const ExecContext& ctx, const LinAttnShape& s, const float* y, float* o, float* den);

// ---- causal backward ------------------------------------------------------------
// Local parts of the gradients (prefix and suffix from other ranks excluded)
// and the block total U of the gradient state. o, den, row_scale are the final
// forward outputs (after the prefix was added). With prefix/suffix != nullptr
// their contributions are added as by the two functions below.
void causal_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                            const float* phi_k, const float* c_k, const float* v, const float* o,
                                            const float* den, const float* row_scale, const float* d_o, float* d_phi_q,
                                            float* d_phi_k, float* d_v, float* block_total_grad, const float* prefix,
                                            const float* suffix);
// d_phi_q[i] += exp(a - L_i) * Pre @ G_i   (forward prefix state (a, Pre)).
void linear_attention_backward_add_prefix(const ExecContext& ctx, const LinAttnShape& s, const float* o,
                                          const float* den, const float* row_scale, const float* d_o,
                                          const float* prefix, float* d_phi_q);
// With the gradient suffix state (rho, R):  d_phi_k[j] += exp(c_k[j] + rho) R V'_j,
// d_v[j] += exp(c_k[j] + rho) (R^T phi_k[j])[:d].
void linear_attention_backward_add_suffix(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                          const float* c_k, const float* v, const float* suffix, float* d_phi_k,
                                          float* d_v);

// ---- bidirectional --------------------------------------------------------------
// Forward: local_total = sum over this block; allreduce it with the combine;
// then finish with the global total and normalise.
void bidirectional_linear_attention_local_state(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                                const float* c_k, const float* v, float* local_total);
void bidirectional_linear_attention_forward_finish(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                   const float* total, float* y, float* row_scale);
// Backward: d_phi_q (written) and the local gradient total; allreduce it with
// the combine; then finish with the global gradient total (writes d_phi_k, d_v).
void bidirectional_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, const float* phi_q,
                                                   const float* o, const float* den, const float* row_scale,
                                                   const float* d_o, const float* total, float* d_phi_q,
                                                   float* local_grad_total);
void bidirectional_linear_attention_backward_finish(const ExecContext& ctx, const LinAttnShape& s, const float* phi_k,
                                                    const float* c_k, const float* v, const float* grad_total,
                                                    float* d_phi_k, float* d_v);

// ---- storage-typed overloads (see the top of this file) ---------------------------
void causal_linear_attention_forward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                           const void* phi_q, const void* phi_k, const float* c_k, const void* v,
                                           float* y, float* row_scale, float* block_total, const float* initial_state);
void linear_attention_add_prefix(const ExecContext& ctx, const LinAttnShape& s, DType storage, const void* phi_q,
                                 const float* prefix, float* y, float* row_scale);
void linear_attention_normalize(const ExecContext& ctx, const LinAttnShape& s, DType storage, const float* y, void* o,
                                float* den);
void causal_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                            const void* phi_q, const void* phi_k, const float* c_k, const void* v,
                                            const void* o, const float* den, const float* row_scale, const void* d_o,
                                            void* d_phi_q, void* d_phi_k, void* d_v, float* block_total_grad,
                                            const float* prefix, const float* suffix);
void linear_attention_backward_add_prefix(const ExecContext& ctx, const LinAttnShape& s, DType storage, const void* o,
                                          const float* den, const float* row_scale, const void* d_o,
                                          const float* prefix, void* d_phi_q);
void linear_attention_backward_add_suffix(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                          const void* phi_k, const float* c_k, const void* v, const float* suffix,
                                          void* d_phi_k, void* d_v);
void bidirectional_linear_attention_local_state(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                const void* phi_k, const float* c_k, const void* v, float* local_total);
void bidirectional_linear_attention_forward_finish(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                   const void* phi_q, const float* total, float* y, float* row_scale);
void bidirectional_linear_attention_backward_local(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                   const void* phi_q, const void* o, const float* den,
                                                   const float* row_scale, const void* d_o, const float* total,
                                                   void* d_phi_q, float* local_grad_total);
void bidirectional_linear_attention_backward_finish(const ExecContext& ctx, const LinAttnShape& s, DType storage,
                                                    const void* phi_k, const float* c_k, const void* v,
                                                    const float* grad_total, void* d_phi_k, void* d_v);

// ---- float64 reference, straight from the definition (one head, O(n^2)) -----------
// o_i = sum_{j in J(i)} w_ij v_j / sum_{j in J(i)} w_ij,  w_ij = exp(c_k[j]) phi_q[i].phi_k[j],
// J(i) = {j <= i} (causal) or all j (bidirectional).
void linear_attention_forward_ref(bool causal, int64_t n, int64_t m, int64_t d, const double* phi_q,
                                  const double* phi_k, const double* c_k, const double* v, double* o);
// Exact gradients of sum(d_o * o) with respect to phi_q, phi_k, v (c_k constant).
void linear_attention_backward_ref(bool causal, int64_t n, int64_t m, int64_t d, const double* phi_q,
                                   const double* phi_k, const double* c_k, const double* v, const double* d_o,
                                   double* d_phi_q, double* d_phi_k, double* d_v);

}  // namespace pf
