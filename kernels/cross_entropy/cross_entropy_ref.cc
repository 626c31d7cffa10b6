// float64 reference softmax cross-entropy: logits [T,V], targets [T] -> losses
// [T] and sums; dlogits [T,V] = (softmax - onehot) * scale.
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/cross_entropy/cross_entropy_math.h"
#include "runtime/check.h"

namespace pf {

CrossEntropySums cross_entropy_forward_ref(const double* logits, const int32_t* targets, double* losses, int64_t T,
                                           int64_t V) {
  CrossEntropySums sums;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t y = targets[t];
    PF_REQUIRE(ValueError, y >= kIgnoreTarget && y < V, "cross_entropy: token " << t << " target " << y << ", V=" << V);
    losses[t] = 0.0;
    if (y == kIgnoreTarget) continue;
    const double* l = logits + t * V;
    double m = l[0];
    int64_t arg = 0;
    for (int64_t j = 1; j < V; ++j)
      if (l[j] > m) m = l[j], arg = j;
    double s = 0.0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(l[j] - m);
    losses[t] = cross_entropy_token_loss(m, s, l[y]);
    sums.loss_sum += losses[t];
    sums.count += 1;
    sums.correct += arg == y ? 1 : 0;
  }
  return sums;
}

void cross_entropy_backward_ref(const double* logits, const int32_t* targets, double* dlogits, int64_t T, int64_t V,
                                double scale) {
  for (int64_t t = 0; t < T; ++t) {
    const int32_t y = targets[t];
    PF_REQUIRE(ValueError, y >= kIgnoreTarget && y < V, "cross_entropy: token " << t << " target " << y << ", V=" << V);
    const double* l = logits + t * V;
    double* d = dlogits + t * V;
    if (y == kIgnoreTarget) {
      for (int64_t j = 0; j < V; ++j) d[j] = 0.0;
      continue;
    }
    double m = l[0];
    for (int64_t j = 1; j < V; ++j) m = l[j] > m ? l[j] : m;
    double s = 0.0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(l[j] - m);
    for (int64_t j = 0; j < V; ++j) d[j] = cross_entropy_logit_grad(l[j], m, 1.0 / s, j == y, scale);
  }
}

}  // namespace pf
