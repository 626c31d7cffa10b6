// One query per head against its n keys (softmax_attention.h): the checks,
// the dispatch by ctx.device and the CPU kernel. CPU, per head (OpenMP over
// heads, on ctx.stream), in one pass over the keys with nothing allocated:
// the online softmax of the forward, key by key, then o /= l.
#include <omp.h>

#include <algorithm>
#include <limits>

#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "runtime/check.h"

namespace pf {
namespace {

float dot(const float* a, const float* b, int64_t d) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < d; ++k) s += a[k] * b[k];
  return s;
}

// Online softmax over the keys: o and l are rescaled when the largest score
// so far grows (the forward's rule, softmax_rescale).
void decode_head(int64_t n, int64_t d, float scale, const float* q, const float* K, const float* V, float* o) {
  std::fill(o, o + d, 0.f);
  float m = -std::numeric_limits<float>::infinity(), l = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    const float s = scale * dot(q, K + j * d, d);
    if (s > m) {
      const float alpha = softmax_rescale(m, s);
      l *= alpha;
      for (int64_t k = 0; k < d; ++k) o[k] *= alpha;
      m = s;
    }
    const float pj = softmax_exp(s - m);
    l += pj;
    const float* v = V + j * d;
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) o[k] += pj * v[k];
  }
  const float inv = 1.f / l;
  for (int64_t k = 0; k < d; ++k) o[k] *= inv;
}

}  // namespace

void softmax_attention_decode_check(const SoftmaxAttentionParams& p, int64_t kv_stride) {
  softmax_attention_check(p);
  PF_REQUIRE(ValueError, p.pieces == nullptr, "softmax attention decode: one query per head, not pieces");
  PF_REQUIRE(ValueError, p.n >= 1, "softmax attention decode: the query needs at least one key, got n=" << p.n);
  PF_REQUIRE(ValueError, kv_stride >= p.n * p.d,
             "softmax attention decode: kv_stride " << kv_stride << " is less than n*d = " << p.n * p.d);
}

void softmax_attention_decode(const ExecContext& ctx, const SoftmaxAttentionParams& p, int64_t kv_stride,
                              const float* q, const float* K, const float* V, float* o) {
  if (ctx.device.is_cuda())
    softmax_attention_decode_cuda(ctx, p, kv_stride, q, K, V, o);
  else
    softmax_attention_decode_cpu(ctx, p, kv_stride, q, K, V, o);
}

void softmax_attention_decode_cpu(const ExecContext& ctx, const SoftmaxAttentionParams& p, int64_t kv_stride,
                                  const float* q, const float* K, const float* V, float* o) {
  softmax_attention_decode_check(p, kv_stride);
  const float scale = softmax_attention_scale(p);
  if (p.heads == 0) return;
  host_launch(ctx, [=] {
#pragma omp parallel for schedule(static) if (p.heads * p.n * p.d > 32768)
    for (int64_t h = 0; h < p.heads; ++h)
      decode_head(p.n, p.d, scale, q + h * p.d, K + h * kv_stride, V + h * kv_stride, o + h * p.d);
  });
}

}  // namespace pf
