// float64 reference of the gated mix (gated_mix.h): plain loops, for tests.
#include <cmath>

#include "kernels/gated_mix/gated_mix.h"

namespace pf {

void gated_mix_forward_ref(const GatedMixShape& s, const double* gate, const double* a, const double* b, double* out) {
  const int64_t e = s.head_elems();
  for (int64_t hh = 0; hh < s.batch * s.heads; ++hh) {
    const double g = 1.0 / (1.0 + std::exp(-gate[hh % s.heads]));
    for (int64_t i = hh * e; i < (hh + 1) * e; ++i) out[i] = (1.0 - g) * a[i] + g * b[i];
  }
}

void gated_mix_backward_ref(const GatedMixShape& s, const double* gate, const double* a, const double* b,
                            const double* dout, double* da, double* db, double* dgate) {
  const int64_t e = s.head_elems();
  for (int64_t hh = 0; hh < s.batch * s.heads; ++hh) {
    const double g = 1.0 / (1.0 + std::exp(-gate[hh % s.heads]));
    double sum = 0;
    for (int64_t i = hh * e; i < (hh + 1) * e; ++i) {
      da[i] = (1.0 - g) * dout[i];
      db[i] = g * dout[i];
      sum += dout[i] * (b[i] - a[i]);
    }
    dgate[hh % s.heads] += g * (1.0 - g) * sum;
  }
}

}  // namespace pf
