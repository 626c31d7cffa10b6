// The scalar whose gradient the FAVOR+ backward computes: sum(dout * out) of
// the float64 reference forward, for the finite-difference tests.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"

namespace pf {
namespace test {

inline double favor_reference_loss(const FavorAttentionParams& p, const double* q, const double* k, const double* v,
                                   const double* W, const double* dout) {
  const int64_t size = p.rows() * p.shape.d;
  std::vector<double> out(size);
  favor_attention_forward_ref(p, q, k, v, W, out.data());
  double s = 0;
  for (int64_t i = 0; i < size; ++i) s += dout[i] * out[i];
  return s;
}

}  // namespace test
}  // namespace pf
