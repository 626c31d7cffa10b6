// OpenMP softmax cross-entropy on ctx.stream: logits [T,V], targets [T] ->
// losses [T] and sums (loss sum in double, counts; the forward synchronises the
// stream to return them); backward dlogits [T,V]. One row per
// iteration; exponentials in fp32, their sum and the log in double. The loss
// sum is added in row order after the parallel loop, so it does not depend on
// the thread count.
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/cross_entropy/cross_entropy_math.h"
#include "runtime/check.h"

namespace pf {
namespace {

void check_targets(const int32_t* targets, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t)
    PF_REQUIRE(ValueError, targets[t] >= kIgnoreTarget && targets[t] < V,
               "cross_entropy: token " << t << " target " << targets[t] << ", V=" << V);
}

}  // namespace

CrossEntropySums cross_entropy_forward_cpu(const ExecContext& ctx, const float* logits, const int32_t* targets,
                                           float* losses, int64_t T, int64_t V) {
  CrossEntropySums sums;  // a host result: wait for the stream, as the CUDA twin does
  host_launch(ctx, [&sums, logits, targets, losses, T, V] {
    check_targets(targets, T, V);
    int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct) if (T * V > 32768)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t y = targets[t];
      losses[t] = 0.f;
      if (y == kIgnoreTarget) continue;
      const float* l = logits + t * V;
      float m = l[0];
      int64_t arg = 0;
      for (int64_t j = 1; j < V; ++j)
        if (l[j] > m) m = l[j], arg = j;
      double s = 0.0;
      for (int64_t j = 0; j < V; ++j) s += std::exp(l[j] - m);
      losses[t] = static_cast<float>(cross_entropy_token_loss(static_cast<double>(m), s, static_cast<double>(l[y])));
      correct += arg == y ? 1 : 0;
    }
    sums.correct = correct;
    for (int64_t t = 0; t < T; ++t) {
      if (targets[t] == kIgnoreTarget) continue;
      sums.loss_sum += losses[t];
      sums.count += 1;
    }
  });
  synchronize(ctx.stream);
  return sums;
}

void cross_entropy_backward_cpu(const ExecContext& ctx, const float* logits, const int32_t* targets, float* dlogits,
                                int64_t T, int64_t V, float scale) {
  host_launch(ctx, [=] {
    check_targets(targets, T, V);
#pragma omp parallel for schedule(static) if (T * V > 32768)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t y = targets[t];
      const float* l = logits + t * V;
      float* d = dlogits + t * V;
      if (y == kIgnoreTarget) {
        for (int64_t j = 0; j < V; ++j) d[j] = 0.f;
        continue;
      }
      float m = l[0];
      for (int64_t j = 1; j < V; ++j) m = l[j] > m ? l[j] : m;
      double s = 0.0;
      for (int64_t j = 0; j < V; ++j) s += std::exp(l[j] - m);
      const float inv = static_cast<float>(1.0 / s);
      for (int64_t j = 0; j < V; ++j) d[j] = cross_entropy_logit_grad(l[j], m, inv, j == y, scale);
    }
  });
}

}  // namespace pf
