// The resolved configuration as TOML: printed by rank 0 at start-up and
// stored in checkpoints, and read back by parse_train_config_text.
#include <toml++/toml.h>

#include <charconv>
#include <regex>
#include <sstream>

#include "launch/core/train_config.h"

namespace pf {

namespace {

// The shortest decimal that reads back as `v`, as a TOML float: fixed
// notation unless it is more than 2 characters longer than scientific
// ("0.9", "0.0002", "1048576.0", "1e-08").
std::string shortest_float(double v) {
  char fixed[400], sci[64];
  const auto f = std::to_chars(fixed, fixed + sizeof(fixed), v, std::chars_format::fixed);
  const auto e = std::to_chars(sci, sci + sizeof(sci), v, std::chars_format::scientific);
  std::string s =
      f.ec == std::errc() && f.ptr - fixed <= e.ptr - sci + 2 ? std::string(fixed, f.ptr) : std::string(sci, e.ptr);
  if (s.find_first_of(".eEin") == std::string::npos) s += ".0";
  return s;
}

// A float field as the double its shortest decimal names: 0.9f is written
// 0.9 (not 0.899999976), and 0.9 read back and narrowed is 0.9f again.
double float_field(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  double d = 0;
  std::from_chars(buf, r.ptr, d);
  return d;
}

// toml++ writes every float with 17 significant digits (exact, but
// 0.90000000000000002) or, relaxed, with 6 (short, but 1048576 becomes
// 1.04858e+06 and a resume restores another number). Each `key = float`
// line is rewritten with the shortest decimal that reads back exactly.
std::string with_shortest_floats(const std::string& text) {
  static const std::regex float_line(R"(^(\s*[A-Za-z0-9_]+ = )([-+]?[0-9][0-9_]*(\.[0-9_]+)?([eE][-+]?[0-9_]+)?)$)");
  std::istringstream in(text);
  std::string out, line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, float_line) && (m[3].matched || m[4].matched)) {
      double v = 0;
      const std::string literal = m[2].str();
      std::from_chars(literal.data(), literal.data() + literal.size(), v);
      line = m[1].str() + shortest_float(v);
    }
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace

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
                                {"beta1", float_field(c.optimizer.adamw.beta1)},
                                {"beta2", float_field(c.optimizer.adamw.beta2)},
                                {"eps", float_field(c.optimizer.adamw.eps)},
                                {"weight_decay", float_field(c.optimizer.adamw.weight_decay)},
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
  // Floats exact and short: what is read back is what ran.
  std::ostringstream os;
  os << toml::toml_formatter{root} << "\n";
  return with_shortest_floats(os.str());
}

}  // namespace pf
