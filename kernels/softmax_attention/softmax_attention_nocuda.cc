// Without a CUDA build the CUDA entry points of softmax attention throw.
#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/check.h"

namespace pf {

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams&, const float*, const float*,
                                    const float*, float*, float*) {
  PF_REQUIRE(CudaError, false, "softmax attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams&, const float*, const float*,
                                     const float*, const float*, const float*, const float*, float*, float*, float*) {
  PF_REQUIRE(CudaError, false, "softmax attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams&, DType, const void*,
                                    const void*, const void*, void*, float*) {
  PF_REQUIRE(CudaError, false, "softmax attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams&, DType, const void*,
                                     const void*, const void*, const void*, const float*, const void*, void*, void*,
                                     void*) {
  PF_REQUIRE(CudaError, false, "softmax attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

void softmax_attention_decode_cuda(const ExecContext& ctx, const SoftmaxAttentionParams&, int64_t, const float*,
                                   const float*, const float*, float*) {
  PF_REQUIRE(CudaError, false, "softmax attention on " << ctx.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf
