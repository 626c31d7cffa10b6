#include "launch/core/train_config.h"

#include <toml++/toml.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "launch/core/model_rules.h"
#include "runtime/check.h"
#include "runtime/device.h"

namespace pf {
namespace {

// A key and where its value came from, for messages:
// "--set 'model.width=32x': model.width" when a --set gave it, else
// "run.toml: model.width".
// Where a key's value came from: the --set that gave it, or `origin`.
std::string source_of(const std::string& origin, const std::map<std::string, std::string>& set_keys,
                      const std::string& key) {
  const auto it = set_keys.find(key);
  return it != set_keys.end() ? "--set '" + it->second + "'" : origin;
}

std::string where_key(const std::string& origin, const std::map<std::string, std::string>& set_keys,
                      const std::string& key) {
  return source_of(origin, set_keys, key) + ": " + key;
}

// Typed access to "section.key" with defaults; remembers every key it was
// asked about so that anything else in the file is reported as unknown.
class Reader {
 public:
  Reader(toml::table& root, std::string origin, const std::map<std::string, std::string>& set_keys)
      : root_(root), origin_(std::move(origin)), set_keys_(set_keys) {}

  template <typename T>
  void get(const char* section, const char* key, T& out) {
    known_.insert(std::string(section) + "." + key);
    const toml::node* node = root_[section][key].node();
    if (!node) return;
    if constexpr (std::is_same_v<T, bool>) {
      auto v = node->value_exact<bool>();
      PF_REQUIRE(ConfigError, v.has_value(), wrong(section, key, *node) << " must be true or false");
      out = *v;
    } else if constexpr (std::is_integral_v<T>) {
      auto v = node->value_exact<int64_t>();
      PF_REQUIRE(ConfigError, v.has_value(), wrong(section, key, *node) << " must be an integer");
      out = static_cast<T>(*v);
    } else if constexpr (std::is_floating_point_v<T>) {
      auto v = node->value<double>();
      PF_REQUIRE(ConfigError, v.has_value() && (node->is_floating_point() || node->is_integer()),
                 wrong(section, key, *node) << " must be a number");
      out = static_cast<T>(*v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      auto v = node->value_exact<std::string>();
      PF_REQUIRE(ConfigError, v.has_value(), wrong(section, key, *node) << " must be a string");
      out = *v;
    } else {
      static_assert(std::is_same_v<T, std::vector<std::string>>);
      out.clear();
      if (auto s = node->value_exact<std::string>()) {
        out.push_back(*s);
        return;
      }
      const toml::array* arr = node->as_array();
      PF_REQUIRE(ConfigError, arr != nullptr, wrong(section, key, *node) << " must be a string or an array of strings");
      for (const toml::node& e : *arr) {
        auto s = e.value_exact<std::string>();
        PF_REQUIRE(ConfigError, s.has_value(), wrong(section, key, *node) << " must hold only strings");
        out.push_back(*s);
      }
    }
  }

  // An enum read by its name: `name` spells the default, `parse` the value read.
  // Its message names the key; this adds where the value came from.
  template <typename E, typename Name, typename Parse>
  void get_named(const char* section, const char* key, E& out, Name name, Parse parse) {
    std::string s = name(out);
    get(section, key, s);
    try {
      out = parse(s);
    } catch (const ConfigError& e) {
      throw ConfigError(source_of(origin_, set_keys_, std::string(section) + "." + key) + ": " + e.what());
    }
  }

  // A string that must be one of `names`: "<key> must be a, b or c, got 'x'".
  void get_choice(const char* section, const char* key, std::string& out, std::initializer_list<const char*> names) {
    get(section, key, out);
    std::string list;
    size_t i = 0;
    for (const char* n : names) {
      if (out == n) return;
      list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(n);
      ++i;
    }
    PF_REQUIRE(ConfigError, false, where(section, key) << " must be " << list << ", got '" << out << "'");
  }

  // Byte sizes accept an integer or a string such as "16GiB".
  void get_bytes(const char* section, const char* key, int64_t& out) {
    known_.insert(std::string(section) + "." + key);
    const toml::node* node = root_[section][key].node();
    if (!node) return;
    const std::string name = std::string(section) + "." + key;
    if (auto i = node->value_exact<int64_t>())
      out = *i;
    else if (auto s = node->value_exact<std::string>())
      out = parse_byte_size(*s, name);
    else
      PF_REQUIRE(ConfigError, false, wrong(section, key, *node) << " must be a byte count or a string like \"16GiB\"");
    PF_REQUIRE(ConfigError, out >= 0, where(section, key) << " must be >= 0");
  }

  void check_unknown() const {
    for (auto&& [section, node] : root_) {
      const std::string s(section.str());
      const toml::table* t = node.as_table();
      PF_REQUIRE(ConfigError, t != nullptr, origin_ << ": '" << s << "' is not a section (expected [" << s << "])");
      for (auto&& [key, value] : *t) {
        (void)value;
        const std::string full = s + "." + std::string(key.str());
        PF_REQUIRE(ConfigError, known_.count(full), origin_ << ": unknown key '" << full << "'" << suggestion(full));
      }
    }
  }

 private:
  std::string where(const char* section, const char* key) const {
    return where_key(origin_, set_keys_, std::string(section) + "." + key);
  }
  // A value of the wrong type: "--set 'k=v': k", or "run.toml:12: k = v" (the
  // file's line and the value as written there).
  std::string wrong(const char* section, const char* key, const toml::node& node) const {
    const std::string full = std::string(section) + "." + key;
    if (set_keys_.count(full)) return where(section, key);
    std::ostringstream m;
    m << origin_;
    if (node.source().begin.line > 0) m << ":" << node.source().begin.line;
    m << ": " << full << " = ";
    node.visit([&m](const auto& value) { m << value; });
    return m.str();
  }
  std::string suggestion(const std::string& full) const {
    const std::string section = full.substr(0, full.find('.'));
    std::string keys;
    for (const auto& k : known_)
      if (k.compare(0, section.size() + 1, section + ".") == 0) keys += (keys.empty() ? "" : ", ") + k;
    return keys.empty() ? " (unknown section '" + section + "')" : " (known keys of [" + section + "]: " + keys + ")";
  }

  toml::table& root_;
  std::string origin_;
  const std::map<std::string, std::string>& set_keys_;
  std::set<std::string> known_;
};

// Applies one --set; returns its key ("section.key").
std::string apply_override(toml::table& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  const size_t dot = assignment.find('.');
  PF_REQUIRE(ConfigError, eq != std::string::npos && dot != std::string::npos && dot < eq,
             "--set '" << assignment << "': expected section.key=value");
  const std::string section = assignment.substr(0, dot);
  const std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const std::string value = assignment.substr(eq + 1);
  PF_REQUIRE(ConfigError, !key.empty() && key.find('.') == std::string::npos,
             "--set '" << assignment << "': expected section.key=value");
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error& e) {
    // A bare word is a string (--set data.mode=single). Text that opens an
    // array, a table or a quoted string is TOML that does not parse: taking
    // it as a string would turn ["x.h5" into a file name.
    const size_t first = value.find_first_not_of(" \t");
    const bool toml_like = first != std::string::npos && std::string("[{\"'").find(value[first]) != std::string::npos;
    PF_REQUIRE(ConfigError, !toml_like,
               "--set '" << assignment << "': the value of " << section << "." << key << ", " << value
                         << ", is not valid TOML: " << e.description());
    parsed.insert_or_assign("v", value);
  }
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table* t = root[section].as_table();
  PF_REQUIRE(ConfigError, t != nullptr, "--set '" << assignment << "': '" << section << "' is not a section");
  t->insert_or_assign(key, *parsed.get("v"));
  return section + "." + key;
}

// Every --set once per key: a second one would silently win over the first,
// where the TOML file refuses a key given twice.
std::map<std::string, std::string> apply_overrides(toml::table& root, const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> keys;
  for (const std::string& o : overrides) {
    const std::string key = apply_override(root, o);
    const auto [it, fresh] = keys.emplace(key, o);
    PF_REQUIRE(ConfigError, fresh,
               "--set: " << key << " is given twice ('" << it->second << "', then '" << o << "'): give it once");
  }
  return keys;
}

// Where a key's value came from, for the messages of the section readers.
struct KeyOrigin {
  const std::string& origin;
  const std::map<std::string, std::string>& set_keys;
  std::string operator()(const char* key) const { return where_key(origin, set_keys, key); }
  // Only where the value came from: the --set, or the origin.
  std::string source(const char* key) const { return source_of(origin, set_keys, key); }
};

void read_model_section(Reader& r, ModelConfig& m) {
  std::string s;
  r.get("model", "layers", m.layers);
  r.get("model", "width", m.width);
  r.get("model", "heads", m.heads);
  r.get("model", "ffn", m.ffn);
  r.get("model", "features", m.features);
  r.get_named("model", "attention", m.attention, attention_kind_name, parse_attention_kind);
  r.get_named("model", "objective", m.objective, objective_name, parse_objective);
  r.get_named("model", "positional", m.positional, positional_name, parse_positional);
  r.get("model", "exp_key_norm", m.exp_key_norm);
  r.get("model", "window", m.window);
  r.get("model", "redraw_interval", m.redraw_interval);
  r.get("model", "feature_draw", m.feature_draw);
  s = "orthogonal";
  r.get_choice("model", "projection", s, {"orthogonal", "iid"});
  m.projection = s == "iid" ? ProjectionKind::Iid : ProjectionKind::Orthogonal;
  s = "chi";
  r.get_choice("model", "feature_scaling", s, {"chi", "sqrt_d"});
  m.feature_scaling = s == "chi" ? FeatureScaling::ChiNorms : FeatureScaling::SqrtD;
  r.get("model", "chunk", m.chunk);
  r.get("model", "checkpoint_activations", m.checkpoint_activations);
  r.get("model", "init_std", m.init_std);
  r.get("model", "mlm_probability", m.mlm_probability);
  r.get("model", "seed", m.seed);
  r.get_named("model", "dtype", m.dtype, dtype_name, parse_model_dtype);
  r.get_named("model", "attention_math", m.attention_math, attention_math_name, parse_attention_math);
}

void read_data_section(Reader& r, DataConfig& d) {
  std::string s;
  r.get("data", "files", d.files);
  r.get("data", "train_split", d.train_split);
  r.get("data", "valid_split", d.valid_split);
  s = sample_mode_name(d.mode);
  r.get_choice("data", "mode", s, {"packed", "family", "concat", "single"});
  d.mode = parse_sample_mode(s);
  s = sampling_name(d.sampling);
  r.get_choice("data", "sampling", s, {"sequence", "cluster"});
  d.sampling = parse_sampling(s);
  r.get("data", "sample_length", d.sample_length);
  r.get("data", "batch_size", d.batch_size);
  r.get("data", "shuffle", d.shuffle);
  r.get("data", "seed", d.seed);
  r.get("data", "prefetch", d.prefetch);
}

// The optimizer's values as read, in double: range-checked before they
// become floats (a finite double may not be a finite float).
struct OptimizerValues {
  double lr, min_lr, beta1, beta2, eps, weight_decay;
};

OptimizerValues read_optimizer_section(Reader& r, OptimizerConfig& o) {
  OptimizerValues v{o.schedule.max_lr, o.schedule.min_lr, o.adamw.beta1, o.adamw.beta2, o.adamw.eps, 0.01};
  r.get("optimizer", "lr", v.lr);
  r.get("optimizer", "min_lr", v.min_lr);
  o.schedule.max_lr = v.lr;
  o.schedule.min_lr = v.min_lr;
  r.get("optimizer", "warmup_steps", o.schedule.warmup_steps);
  r.get("optimizer", "beta1", v.beta1);
  r.get("optimizer", "beta2", v.beta2);
  r.get("optimizer", "eps", v.eps);
  r.get("optimizer", "weight_decay", v.weight_decay);
  o.adamw.beta1 = static_cast<float>(v.beta1);
  o.adamw.beta2 = static_cast<float>(v.beta2);
  o.adamw.eps = static_cast<float>(v.eps);
  o.adamw.weight_decay = static_cast<float>(v.weight_decay);
  r.get("optimizer", "clip_norm", o.clip_norm);
  r.get_named("optimizer", "loss_scale", o.loss_scale.mode, loss_scale_mode_name, parse_loss_scale_mode);
  r.get("optimizer", "loss_scale_init", o.loss_scale.init);
  r.get("optimizer", "loss_scale_window", o.loss_scale.window);
  r.get("optimizer", "max_skipped_steps", o.loss_scale.max_skips);
  return v;
}

void read_run_sections(Reader& r, RunConfig& run, CheckpointConfig& ck) {
  r.get("train", "steps", run.steps);
  r.get("train", "log_interval", run.log_interval);
  r.get("train", "eval_interval", run.eval_interval);
  r.get("train", "eval_batches", run.eval_batches);
  r.get("train", "metrics", run.metrics);
  r.get("train", "stop_at", run.stop_at);
  r.get("checkpoint", "dir", ck.dir);
  r.get("checkpoint", "interval", ck.interval);
  r.get("checkpoint", "keep", ck.keep);
  r.get("checkpoint", "resume", ck.resume);
  r.get("checkpoint", "init_from", ck.init_from);
  r.get("checkpoint", "allow_data_change", ck.allow_data_change);
}

void read_parallel_section(Reader& r, const KeyOrigin& at, ParallelConfig& p) {
  r.get("parallel", "sp", p.sp);
  std::string s = scan_algorithm_name(p.attention.scan);
  r.get("parallel", "scan", s);
  std::string names;
  bool known = false;
  for (ScanAlgorithm a :
       {ScanAlgorithm::Auto, ScanAlgorithm::Chain, ScanAlgorithm::Allgather, ScanAlgorithm::RecursiveDoubling}) {
    known = known || s == scan_algorithm_name(a);
    names += (names.empty() ? "" : ", ") + std::string(scan_algorithm_name(a));
  }
  PF_REQUIRE(ConfigError, known, at("parallel.scan") << " must be one of " << names << ", got '" << s << "'");
  p.attention.scan = parse_scan_algorithm(s);
  r.get("parallel", "overlap", p.attention.overlap_comm);
  // Obsolete since attention holds no features per head: still read, with no
  // effect, because checkpoints written before store it in their configuration.
  int64_t obsolete_head_group = 0;
  r.get("parallel", "head_group", obsolete_head_group);
  r.get("parallel", "bucket_mib", p.bucket_mib);
  r.get("parallel", "overlap_allreduce", p.overlap_allreduce);
  r.get("parallel", "timeout_s", p.timeout_s);
}

void read_device_section(Reader& r, DeviceConfig& dev) {
  r.get("device", "backend", dev.backend);
  r.get_bytes("device", "memory_cap", dev.memory_cap);
  r.get("device", "cpu_streams", dev.cpu_streams);
  r.get("device", "comm", dev.comm);
}

// A value out of its range names the key (and the --set that gave it), the
// value and the range.
void check_ranges(const TrainConfig& c, const OptimizerValues& v, const KeyOrigin& at) {
  auto in_range = [&](const char* key, auto value, bool ok, const std::string& range) {
    if (ok) return;
    std::ostringstream os;
    os << at(key) << " = " << value << " is out of range: " << range;
    throw ConfigError(os.str());
  };
  const RunConfig& run = c.run;
  const OptimizerConfig& o = c.optimizer;
  const DataConfig& d = c.data;
  const CheckpointConfig& ck = c.checkpoint;
  const ParallelConfig& p = c.parallel;
  in_range("train.steps", run.steps, run.steps >= 1, "must be >= 1");
  in_range("train.log_interval", run.log_interval, run.log_interval >= 1, "must be >= 1");
  in_range("train.stop_at", run.stop_at, run.stop_at >= 0, "must be >= 0 (0: run to train.steps)");
  in_range("train.stop_at", run.stop_at, run.stop_at == 0 || !ck.dir.empty(),
           "stopping at a step saves a checkpoint there, and checkpoint.dir is not set");
  in_range("train.eval_interval", run.eval_interval, run.eval_interval >= 0, "must be >= 0 (0: only at the end)");
  in_range("train.eval_batches", run.eval_batches, run.eval_batches >= 0, "must be >= 0 (0: the whole split)");
  // The optimizer computes in float32: a finite double may not be a finite float.
  auto finite32 = [](double x) { return std::isfinite(static_cast<float>(x)); };
  in_range("optimizer.lr", v.lr, finite32(v.lr) && v.lr > 0, "must be finite (in float32) and > 0");
  std::ostringstream lr;
  lr << "must be in [0, optimizer.lr], and optimizer.lr = " << v.lr << " (" << at.source("optimizer.lr") << ")";
  in_range("optimizer.min_lr", v.min_lr, std::isfinite(v.min_lr) && v.min_lr >= 0 && v.min_lr <= v.lr, lr.str());
  in_range("optimizer.warmup_steps", o.schedule.warmup_steps,
           o.schedule.warmup_steps >= 0 && o.schedule.warmup_steps <= run.steps,
           "must be in [0, train.steps = " + std::to_string(run.steps) + "]");
  in_range("optimizer.beta1", v.beta1, v.beta1 >= 0 && v.beta1 < 1, "must be in [0, 1)");
  in_range("optimizer.beta2", v.beta2, v.beta2 >= 0 && v.beta2 < 1, "must be in [0, 1)");
  in_range("optimizer.eps", v.eps, finite32(v.eps) && static_cast<float>(v.eps) > 0,
           "must be finite and > 0 (in float32: at least about 1.4e-45)");
  in_range("optimizer.weight_decay", v.weight_decay, finite32(v.weight_decay) && v.weight_decay >= 0,
           "must be finite and >= 0");
  in_range("optimizer.clip_norm", o.clip_norm, std::isfinite(o.clip_norm), "must be finite (<= 0 disables clipping)");
  // Bounds far above any run (2^40 tokens a sample or a batch, 1 TiB a
  // bucket) keep the planner's and the buckets' byte counts in int64.
  constexpr int64_t kMaxTokens = int64_t{1} << 40;
  in_range("data.sample_length", d.sample_length, d.sample_length >= 1 && d.sample_length <= kMaxTokens,
           "must be in [1, 2^40]");
  in_range("data.batch_size", d.batch_size,
           d.batch_size >= 1 && d.batch_size <= kMaxTokens && d.sample_length <= kMaxTokens / d.batch_size,
           "must be >= 1, with data.batch_size x data.sample_length <= 2^40 tokens");
  in_range("data.prefetch", d.prefetch, d.prefetch >= 0, "must be >= 0");
  in_range("checkpoint.interval", ck.interval, ck.interval >= 0, "must be >= 0 (0: only at the end and on a stop)");
  in_range("checkpoint.keep", ck.keep, ck.keep >= 1, "must be >= 1");
  in_range("parallel.sp", p.sp, p.sp >= 1, "must be >= 1");
  in_range("parallel.bucket_mib", p.bucket_mib, p.bucket_mib >= 1 && p.bucket_mib <= (int64_t{1} << 20),
           "must be in [1, 2^20] (1 TiB)");
  in_range("parallel.timeout_s", p.timeout_s, p.timeout_s >= 0 && std::isfinite(p.timeout_s),
           "must be >= 0 seconds (0: no limit)");
  in_range("optimizer.loss_scale_init", o.loss_scale.init, finite32(o.loss_scale.init) && o.loss_scale.init > 0,
           "must be finite (in float32) and > 0");
  in_range("optimizer.loss_scale_window", o.loss_scale.window, o.loss_scale.window >= 1, "must be >= 1");
  in_range("optimizer.max_skipped_steps", o.loss_scale.max_skips, o.loss_scale.max_skips >= 1, "must be >= 1");
}

void check_device(const DeviceConfig& dev, const KeyOrigin& at) {
  auto one_of = [&](const char* key, const std::string& v, std::initializer_list<const char*> names) {
    std::string list;
    for (const char* n : names) {
      if (v == n) return;
      list += (list.empty() ? "" : ", ") + std::string(n);
    }
    throw ConfigError(at(key) + " must be one of " + list + ", got '" + v + "'");
  };
  one_of("device.backend", dev.backend, {"auto", "cpu", "cuda"});
  one_of("device.comm", dev.comm, {"auto", "mpi", "nccl", "staged"});
  try {
    parse_host_streams(dev.cpu_streams);
  } catch (const ConfigError& e) {
    throw ConfigError(at("device.cpu_streams") + ": " + e.what());
  }
}

// The model's messages name their key ("model.width = 0 is out of range
// ..."): blame the --set that gave it, if one did.
void check_model(const ModelConfig& m, const KeyOrigin& at) {
  try {
    m.validate();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    static const std::regex model_key("model\\.[a-z_0-9]+");
    std::smatch key;
    throw ConfigError((std::regex_search(what, key, model_key) ? at.source(key.str().c_str()) : at.origin) + ": " +
                      what);
  }
}

TrainConfig read_config(toml::table& root, const std::string& origin,
                        const std::map<std::string, std::string>& set_keys) {
  TrainConfig c;
  Reader r(root, origin, set_keys);
  const KeyOrigin at{origin, set_keys};
  read_model_section(r, c.model);
  read_data_section(r, c.data);
  const OptimizerValues optimizer = read_optimizer_section(r, c.optimizer);
  read_run_sections(r, c.run, c.checkpoint);
  c.optimizer.schedule.total_steps = c.run.steps;
  read_parallel_section(r, at, c.parallel);
  read_device_section(r, c.device);
  r.check_unknown();
  check_ranges(c, optimizer, at);
  check_device(c.device, at);
  check_model(c.model, at);
  c.source_text = format_train_config(c);
  return c;
}

}  // namespace

std::string toml_quoted(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", c);
      out += code;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  toml::table root;
  if (!path.empty()) {
    try {
      root = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      std::ostringstream os;
      os << path << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
      throw ConfigError(os.str());
    }
  }
  const std::map<std::string, std::string> set_keys = apply_overrides(root, overrides);
  TrainConfig c = read_config(root, path.empty() ? std::string("configuration") : path, set_keys);
  c.source_path = path;
  return c;
}

TrainConfig parse_train_config_text(const std::string& text, const std::string& origin,
                                    const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw ConfigError(origin + ": stored configuration does not parse: " + std::string(e.description()));
  }
  const std::map<std::string, std::string> set_keys = apply_overrides(root, overrides);
  return read_config(root, origin, set_keys);
}

void validate_ranks(const TrainConfig& cfg, int world_size) {
  const int64_t sp = cfg.parallel.sp;
  PF_REQUIRE(ConfigError, world_size % sp == 0,
             "parallel.sp = " << sp << " does not divide the " << world_size << " launched ranks");
  require_softmax_on_one_rank(cfg.model, SequenceSplit{sp, ""});
}

void validate_layout(const TrainConfig& cfg, int world_size) {
  validate_ranks(cfg, world_size);
  const int64_t sp = cfg.parallel.sp;
  PF_REQUIRE(ConfigError, cfg.data.sample_length % sp == 0,
             "data.sample_length = " << cfg.data.sample_length << " is not divisible by parallel.sp = " << sp);
  require_window_within_neighbour(cfg.model, cfg.data.sample_length, SequenceSplit{sp, ""});
}

}  // namespace pf
