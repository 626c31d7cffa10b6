// Loss scaling for mixed-precision training. The loss is multiplied by
// scale() before the backward, so gradients that would underflow in 16 bits
// (the rounded dY of every GEMM) stay representable; the optimizer divides
// them back. After the gradients are summed, update(finite) decides:
//   non-finite (Inf/NaN anywhere): the step is skipped (no parameter or
//     moment change) and, when dynamic, the scale halves;
//   finite: the update is applied and, when dynamic, the scale doubles after
//     `window` finite steps in a row.
// Modes: dynamic (the default for f16), fixed (a constant scale; the default
// for f32 and bf16 is fixed at 1). Non-finite gradients skip the step in every
// mode; `max_skips` skips in a row throw TrainingError (the run diverged, or
// the forward itself overflows, which no scale can fix).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dtype.h"

namespace pf {

enum class LossScaleMode { Auto, Dynamic, Fixed };
const char* loss_scale_mode_name(LossScaleMode m);           // "auto", "dynamic", "fixed"
LossScaleMode parse_loss_scale_mode(const std::string& s);  // ConfigError naming the text

struct LossScaleConfig {
  LossScaleMode mode = LossScaleMode::Auto;  // auto: dynamic for f16, fixed otherwise
  double init = 65536.0;   // initial scale (dynamic) or the scale (fixed; auto-fixed uses 1)
  int64_t window = 1000;   // finite steps in a row before the dynamic scale doubles
  int64_t max_skips = 50;  // skipped steps in a row that end the run
};

class LossScaler {
 public:
  LossScaler(const LossScaleConfig& cfg, DType model_dtype);

  double scale() const { return scale_; }
  bool dynamic() const { return dynamic_; }
  int64_t good_steps() const { return good_; }  // finite steps since the last change
  // Returns whether the step's update is applied.
  bool update(bool finite);
  // Checkpointed state (exact resume).
  void restore(double scale, int64_t good_steps);

 private:
  bool dynamic_;
  double scale_;
  int64_t window_, max_skips_;
  int64_t good_ = 0, skips_ = 0;
};

}  // namespace pf
