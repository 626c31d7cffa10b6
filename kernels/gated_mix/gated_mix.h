// Per-head gated mix of two attention outputs, for the windowed hybrid
// attention (model.window with a linear kind): a (the linear kernel's, over
// every earlier position) and b (exact softmax over the last `window`
// positions), both [batch * heads, n, d] contiguous, head hh = b * heads + h:
//   forward:  out = a + s_h (b - a) = (1 - s_h) a + s_h b,  s_h = sigmoid(gate[h])
//   backward: da = (1 - s_h) dout, db = s_h dout (overwritten),
//             dgate[h] += s_h (1 - s_h) sum over the batch, n and d of dout (b - a)
// gate and dgate [heads] live on ctx.device with the tensors. out may alias a
// or b; da and db may alias dout only if they are not both given the same
// buffer. The sums of dgate run in a fixed order (per (batch, head) then over
// the batch in order): the result does not depend on threads or blocks.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

struct GatedMixShape {
  int64_t batch = 1, heads = 1, n = 0, d = 1;
  int64_t head_elems() const { return n * d; }
  int64_t total() const { return batch * heads * n * d; }
};

void gated_mix_check(const GatedMixShape& s);  // ValueError naming the bad size

void gated_mix_forward(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                       const float* b, float* out);
void gated_mix_backward(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                        const float* b, const float* dout, float* da, float* db, float* dgate);

void gated_mix_forward_cpu(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                           const float* b, float* out);
void gated_mix_backward_cpu(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                            const float* b, const float* dout, float* da, float* db, float* dgate);
// CUDA: dgate's per-(batch, head) sums go through a scratch buffer recorded
// in ctx.tracker (required for the backward).
void gated_mix_forward_cuda(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                            const float* b, float* out);
void gated_mix_backward_cuda(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                             const float* b, const float* dout, float* da, float* db, float* dgate);

// float64 reference, for tests.
void gated_mix_forward_ref(const GatedMixShape& s, const double* gate, const double* a, const double* b, double* out);
void gated_mix_backward_ref(const GatedMixShape& s, const double* gate, const double* a, const double* b,
                            const double* dout, double* da, double* db, double* dgate);

}  // namespace pf
