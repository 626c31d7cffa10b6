// OpenMP gated mix (gated_mix.h), one (batch, head) block per iteration, on
// ctx.stream. dgate: each block's sum in double, then added per head over the
// batch in order.
#include <vector>

#include "kernels/gated_mix/gated_mix.h"
#include "kernels/gated_mix/gated_mix_math.h"

namespace pf {

void gated_mix_forward_cpu(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                           const float* b, float* out) {
  host_launch(ctx, [=] {
    const int64_t e = s.head_elems(), blocks = s.batch * s.heads;
#pragma omp parallel for schedule(static) if (s.total() > 65536)
    for (int64_t hh = 0; hh < blocks; ++hh) {
      const float g = gated_mix_sigmoid(gate[hh % s.heads]);
      const float* x = a + hh * e;
      const float* y = b + hh * e;
      float* o = out + hh * e;
#pragma omp simd
      for (int64_t i = 0; i < e; ++i) o[i] = x[i] + g * (y[i] - x[i]);
    }
  });
}

void gated_mix_backward_cpu(const ExecContext& ctx, const GatedMixShape& s, const float* gate, const float* a,
                            const float* b, const float* dout, float* da, float* db, float* dgate) {
  host_launch(ctx, [=] {
    const int64_t e = s.head_elems(), blocks = s.batch * s.heads;
    std::vector<double> sums(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (s.total() > 65536)
    for (int64_t hh = 0; hh < blocks; ++hh) {
      const float g = gated_mix_sigmoid(gate[hh % s.heads]);
      const float* x = a + hh * e;
      const float* y = b + hh * e;
      const float* d = dout + hh * e;
      double sum = 0;
      for (int64_t i = 0; i < e; ++i) {
        const float di = d[i];
        sum += static_cast<double>(di) * (static_cast<double>(y[i]) - static_cast<double>(x[i]));
        da[hh * e + i] = (1.f - g) * di;
        db[hh * e + i] = g * di;
      }
      sums[static_cast<size_t>(hh)] = sum;
    }
    for (int64_t h = 0; h < s.heads; ++h) {
      const double g = gated_mix_sigmoid(gate[h]);
      double total = 0;
      for (int64_t bb = 0; bb < s.batch; ++bb) total += sums[static_cast<size_t>(bb * s.heads + h)];
      dgate[h] += static_cast<float>(g * (1.0 - g) * total);
    }
  });
}

}  // namespace pf
