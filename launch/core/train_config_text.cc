// The resolved configuration as TOML: printed by rank 0 at start-up and
// stored in checkpoints, and read back by parse_train_config_text.
#include <toml++/toml.h>

#include <sstream>

#include "launch/core/train_config.h"

namespace pf {

std::string format_train_config(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  toml::array files;
  for (const auto& f : c.data.files) files.push_back(f);
  toml::table root{
      {"model", toml::table{{"layers", m.layers},
                            {"width", m.width},
                            {"heads", m.heads},
                            {"ffn", m.ffn},
                            {"features", m.features},
                            {"attention", attention_kind_name(m.attention)},
                            {"objective", objective_name(m.objective)},
                            {"positional", positional_name(m.positional)},
                            {"exp_key_norm", m.exp_key_norm},
                            {"redraw_interval", m.redraw_interval},
                            {"feature_draw", m.feature_draw},
                            {"projection", projection_name(m.projection)},
                            {"feature_scaling", feature_scaling_name(m.feature_scaling)},
                            {"chunk", m.chunk},
                            {"window", m.window},
                            {"checkpoint_activations", m.checkpoint_activations},
                            {"init_std", m.init_std},
                            {"mlm_probability", m.mlm_probability},
                            {"seed", static_cast<int64_t>(m.seed)},
                            {"dtype", dtype_name(c.model.dtype)},
                            {"attention_math", attention_math_name(c.model.attention_math)}}},
      {"data", toml::table{{"files", files},
                           {"train_split", c.data.train_split},
                           {"valid_split", c.data.valid_split},
                           {"mode", sample_mode_name(c.data.mode)},
                           {"sampling", sampling_name(c.data.sampling)},
                           {"sample_length", c.data.sample_length},
                           {"batch_size", c.data.batch_size},
                           {"shuffle", c.data.shuffle},
                           {"seed", static_cast<int64_t>(c.data.seed)},
                           {"prefetch", c.data.prefetch}}},
      {"optimizer", toml::table{{"lr", c.optimizer.schedule.max_lr},
                                {"min_lr", c.optimizer.schedule.min_lr},
                                {"warmup_steps", c.optimizer.schedule.warmup_steps},
                                {"beta1", static_cast<double>(c.optimizer.adamw.beta1)},
                                {"beta2", static_cast<double>(c.optimizer.adamw.beta2)},
                                {"eps", static_cast<double>(c.optimizer.adamw.eps)},
                                {"weight_decay", static_cast<double>(c.optimizer.adamw.weight_decay)},
                                {"clip_norm", c.optimizer.clip_norm},
                                {"loss_scale", loss_scale_mode_name(c.optimizer.loss_scale.mode)},
                                {"loss_scale_init", c.optimizer.loss_scale.init},
                                {"loss_scale_window", c.optimizer.loss_scale.window},
                                {"max_skipped_steps", c.optimizer.loss_scale.max_skips}}},
      {"train", toml::table{{"steps", c.run.steps},
                            {"log_interval", c.run.log_interval},
                            {"eval_interval", c.run.eval_interval},
                            {"eval_batches", c.run.eval_batches},
                            {"metrics", c.run.metrics},
                            {"stop_at", c.run.stop_at}}},
      {"checkpoint", toml::table{{"dir", c.checkpoint.dir},
                                 {"interval", c.checkpoint.interval},
                                 {"keep", c.checkpoint.keep},
                                 {"resume", c.checkpoint.resume},
                                 {"init_from", c.checkpoint.init_from},
                                 {"allow_data_change", c.checkpoint.allow_data_change}}},
      {"parallel", toml::table{{"sp", c.parallel.sp},
                               {"scan", scan_algorithm_name(c.parallel.attention.scan)},
                               {"overlap", c.parallel.attention.overlap_comm},
                               {"bucket_mib", c.parallel.bucket_mib},
                               {"overlap_allreduce", c.parallel.overlap_allreduce},
                               {"timeout_s", c.parallel.timeout_s}}},
      {"device", toml::table{{"backend", c.device.backend},
                             {"memory_cap", c.device.memory_cap},
                             {"cpu_streams", c.device.cpu_streams},
                             {"comm", c.device.comm}}},
  };
  // Floats with the precision they were written with (0.9, not 0.899999976).
  std::ostringstream os;
  os << toml::toml_formatter{root, toml::toml_formatter::default_flags | toml::format_flags::relaxed_float_precision}
     << "\n";
  return os.str();
}

}  // namespace pf
