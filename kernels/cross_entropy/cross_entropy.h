// Softmax cross-entropy over the vocabulary for token rows.
//   logits, dlogits [T, V]; targets [T] int32 in [0, V) or -1 (= ignore);
//   losses [T] (per-token loss, 0 for ignored tokens).
//   forward returns SUMS over this rank's tokens: the loss sum, the number of
//   predicted (non-ignored) tokens and the number whose top-1 logit (first
//   index on ties) is the target. The caller allreduces them and averages over
//   the GLOBAL count.
//   backward: dlogits = (softmax(logits) - onehot(target)) * scale, zero rows
//   for ignored tokens; scale is passed in (1 / global count). dlogits may
//   alias logits (in place).
// Numerically stable for any finite logits: max-subtracted log-sum-exp, the
// exponential sums in fp32 (CUDA) or double (CPU), never Inf/NaN.
// The CPU path rejects targets outside [-1, V) with a ValueError; the CUDA
// path cannot read targets on the host and treats them as ignored.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

struct CrossEntropySums {
  double loss_sum = 0.0;  // sum of per-token losses over predicted tokens
  int64_t count = 0;      // predicted tokens (target != -1)
  int64_t correct = 0;    // predicted tokens whose argmax logit is the target
};

// Returns host sums, so it synchronises ctx.stream (both backends); on CUDA it
// uses 4 T bytes of temporary device memory recorded in ctx.tracker (required).
CrossEntropySums cross_entropy_forward(const ExecContext& ctx, const float* logits, const int32_t* targets,
                                       float* losses, int64_t T, int64_t V);
void cross_entropy_backward(const ExecContext& ctx, const float* logits, const int32_t* targets, float* dlogits,
                            int64_t T, int64_t V, float scale);

CrossEntropySums cross_entropy_forward_cpu(const ExecContext& ctx, const float* logits, const int32_t* targets,
                                           float* losses, int64_t T, int64_t V);
void cross_entropy_backward_cpu(const ExecContext& ctx, const float* logits, const int32_t* targets, float* dlogits,
                                int64_t T, int64_t V, float scale);
CrossEntropySums cross_entropy_forward_cuda(const ExecContext& ctx, const float* logits, const int32_t* targets,
                                            float* losses, int64_t T, int64_t V);
void cross_entropy_backward_cuda(const ExecContext& ctx, const float* logits, const int32_t* targets, float* dlogits,
                                 int64_t T, int64_t V, float scale);

CrossEntropySums cross_entropy_forward_ref(const double* logits, const int32_t* targets, double* losses, int64_t T,
                                           int64_t V);
void cross_entropy_backward_ref(const double* logits, const int32_t* targets, double* dlogits, int64_t T, int64_t V,
                                double scale);

// log softmax(logits [V])[target] of one row on the host, in double (for the
// per-token scores of evaluation and scoring).
double log_softmax_at(const float* logits, int64_t V, int32_t target);

}  // namespace pf
