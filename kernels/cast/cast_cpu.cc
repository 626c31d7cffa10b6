// CPU conversions: f16 through the compiler's _Float16 (IEEE binary16, round
// to nearest even), bf16 by rounding the top 16 bits of the fp32 word to
// nearest even (NaN kept quiet). OpenMP over the elements, on ctx.stream.
#include <cstring>

#include "kernels/cast/cast.h"

namespace pf {
namespace {

inline uint16_t narrow_bf16(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu)) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

inline float widen_bf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &b, sizeof(v));
  return v;
}

}  // namespace

void cast_narrow_cpu(const ExecContext& ctx, DType storage, const float* in, void* out, int64_t count) {
  host_launch(ctx, [=] {
    if (storage == DType::f16) {
      _Float16* o = static_cast<_Float16*>(out);
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t k = 0; k < count; ++k) o[k] = static_cast<_Float16>(in[k]);
    } else {
      uint16_t* o = static_cast<uint16_t*>(out);
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t k = 0; k < count; ++k) o[k] = narrow_bf16(in[k]);
    }
  });
}

void cast_widen_cpu(const ExecContext& ctx, DType storage, const void* in, float* out, int64_t count) {
  host_launch(ctx, [=] {
    if (storage == DType::f16) {
      const _Float16* i = static_cast<const _Float16*>(in);
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t k = 0; k < count; ++k) out[k] = static_cast<float>(i[k]);
    } else {
      const uint16_t* i = static_cast<const uint16_t*>(in);
#pragma omp parallel for schedule(static) if (count > 65536)
      for (int64_t k = 0; k < count; ++k) out[k] = widen_bf16(i[k]);
    }
  });
}

}  // namespace pf
