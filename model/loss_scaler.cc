#include "model/loss_scaler.h"

#include <cmath>

#include "runtime/check.h"

namespace pf {

const char* loss_scale_mode_name(LossScaleMode m) {
  switch (m) {
    case LossScaleMode::Auto: return "auto";
    case LossScaleMode::Dynamic: return "dynamic";
    case LossScaleMode::Fixed: return "fixed";
  }
  return "?";
}

LossScaleMode parse_loss_scale_mode(const std::string& s) {
  for (LossScaleMode m : {LossScaleMode::Auto, LossScaleMode::Dynamic, LossScaleMode::Fixed})
    if (s == loss_scale_mode_name(m)) return m;
  PF_REQUIRE(ConfigError, false, "optimizer.loss_scale: unknown mode '" << s << "' (expected auto, dynamic or fixed)");
  return LossScaleMode::Auto;
}

LossScaler::LossScaler(const LossScaleConfig& cfg, DType model_dtype)
    : dynamic_(cfg.mode == LossScaleMode::Dynamic || (cfg.mode == LossScaleMode::Auto && model_dtype == DType::f16)),
      scale_(cfg.mode == LossScaleMode::Auto && !dynamic_ ? 1.0 : cfg.init),
      window_(cfg.window),
      max_skips_(cfg.max_skips) {
  PF_REQUIRE(ConfigError, std::isfinite(cfg.init) && cfg.init > 0,
             "optimizer.loss_scale_init must be a finite number > 0, got " << cfg.init);
  PF_REQUIRE(ConfigError, cfg.window >= 1, "optimizer.loss_scale_window must be >= 1, got " << cfg.window);
  PF_REQUIRE(ConfigError, cfg.max_skips >= 1, "optimizer.max_skipped_steps must be >= 1, got " << cfg.max_skips);
}

bool LossScaler::update(bool finite) {
  if (!finite) {
    ++skips_;
    good_ = 0;
    PF_REQUIRE(TrainingError, skips_ < max_skips_,
               skips_ << " steps in a row had non-finite gradients (loss scale now " << scale_
                      << (dynamic_ ? ", dynamic" : ", fixed")
                      << "): the run diverged or its forward overflows; lower optimizer.lr, use model.dtype = "
                         "\"bf16\" or \"f32\", or resume from an earlier checkpoint");
    if (dynamic_) scale_ *= 0.5;
    return false;
  }
  skips_ = 0;
  if (dynamic_ && ++good_ >= window_) {
    scale_ *= 2.0;
    good_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t good_steps) {
  PF_REQUIRE(DataError, std::isfinite(scale) && scale > 0 && good_steps >= 0,
             "loss scaler state: scale " << scale << ", good steps " << good_steps);
  scale_ = scale;
  good_ = good_steps;
  skips_ = 0;
}

}  // namespace pf
