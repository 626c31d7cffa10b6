// float64 reference rounding to f16 / bf16: x = f * 2^e with f in [0.5, 1);
// keep `bits` significant bits (11 for f16, 8 for bf16) by nearbyint (ties to
// even in the default rounding mode), with the exponent floored at the
// smallest normal (so subnormals lose bits as the format does) and results
// beyond the largest finite value sent to infinity.
#include <cmath>
#include <limits>

#include "kernels/cast/cast.h"

namespace pf {

double round_to_storage_ref(double x, DType storage) {
  if (storage == DType::f32) return static_cast<double>(static_cast<float>(x));
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  const bool half = storage == DType::f16;
  const int bits = half ? 11 : 8;
  const int min_exp = half ? -13 : -125;  // smallest normal = 0.5 * 2^min_exp
  const double max_finite = half ? 65504.0 : std::ldexp(255.0, 120);  // 0x7F7F: (2 - 2^-7) * 2^127
  int e = 0;
  std::frexp(x, &e);
  if (e < min_exp) e = min_exp;
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, bits - e)), e - bits);
  if (std::abs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

}  // namespace pf
