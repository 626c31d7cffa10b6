// Learning-rate schedule: linear warmup, then cosine decay to a floor.
//   step is 0-based (the update about to be taken).
//   step <  warmup:          max_lr * (step + 1) / warmup
//   warmup <= step < total:  min_lr + (max_lr - min_lr) * 0.5 * (1 + cos(pi * r)),
//                            r = (step - warmup) / (total - warmup)
//   step >= total:           min_lr
// So the first update uses max_lr / warmup, step warmup - 1 and step warmup
// both use max_lr, the midpoint of the decay (max_lr + min_lr) / 2.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/check.h"

namespace pf {

struct LrSchedule {
  double max_lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
};

inline double learning_rate_at(const LrSchedule& s, int64_t step) {
  PF_REQUIRE(ConfigError, s.warmup_steps >= 0 && s.total_steps >= s.warmup_steps && step >= 0,
             "lr schedule: warmup_steps=" << s.warmup_steps << " total_steps=" << s.total_steps << " step=" << step
                                          << " (need 0 <= warmup <= total, step >= 0)");
  if (step < s.warmup_steps)
    return s.max_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  if (step >= s.total_steps) return s.min_lr;
  const double r = static_cast<double>(step - s.warmup_steps) / static_cast<double>(s.total_steps - s.warmup_steps);
  return s.min_lr + (s.max_lr - s.min_lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * r));
}

}  // namespace pf
