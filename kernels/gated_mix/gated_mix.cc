// Dispatch of the gated mix by ctx.device, and its shape check.
#include "kernels/gated_mix/gated_mix.h"

#include "runtime/check.h"

namespace pf {

void gated_mix_check(const GatedMixShape& s) {
  PF_REQUIRE(ValueError, s.batch >= 0 && s.heads >= 1 && s.n >= 0 && s.d >= 1,
             "gated mix: bad shape batch=" << s.batch << " heads=" << s.heads << " n=" << s.n << " d=" << s.d);
}

void gated_mix_forward(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                       const float* b, float* out) {
  gated_mix_check(s);
  if (ctx.device.is_cuda())
    gated_mix_forward_cuda(ctx, s, gate, a, b, out);
  else
    gated_mix_forward_cpu(ctx, s, gate, a, b, out);
}

void gated_mix_backward(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                        const float* b, const float* dout, float* da, float* db, float* dgate) {
  gated_mix_check(s);
  PF_REQUIRE(ValueError, da != db, "gated mix backward: da and db must be different buffers");
  if (ctx.device.is_cuda())
    gated_mix_backward_cuda(ctx, s, gate, a, b, dout, da, db, dgate);
  else
    gated_mix_backward_cpu(ctx, s, gate, a, b, dout, da, db, dgate);
}

}  // namespace pf
