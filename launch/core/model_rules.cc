#include "launch/core/model_rules.h"

#include <algorithm>

#include "runtime/check.h"

namespace pf {

bool attends_to_every_key(const ModelConfig& model) {
  return model.attention == AttentionKind::Softmax && model.window == 0;
}

void require_softmax_on_one_rank(const ModelConfig& model, const SequenceSplit& split) {
  const int64_t sp = split.ranks;
  if (split.checkpoint.empty()) {
    PF_REQUIRE(ConfigError, !attends_to_every_key(model) || sp == 1,
               "model.attention = softmax needs parallel.sp = 1 (exact attention keeps the whole sequence on one "
               "rank; a local window, model.window, crosses ranks), got sp = "
                   << sp);
  } else {
    PF_REQUIRE(ConfigError, !attends_to_every_key(model) || sp == 1,
               split.checkpoint << ": model.attention = softmax needs the whole sequence on one rank, but " << sp
                                << " ranks split it: run on one rank, or with random features (--set "
                                   "model.attention=favor)");
  }
}

void require_window_within_neighbour(const ModelConfig& model, int64_t sample_length, const SequenceSplit& split) {
  const int64_t window = model.window, sp = split.ranks, local = sample_length / sp;
  // (window - 1 <= sample_length / sp is sp (window - 1) <= sample_length,
  // without the product.)
  const bool within = window == 0 || sp == 1 || window - 1 <= local;
  if (split.checkpoint.empty()) {
    PF_REQUIRE(ConfigError, within,
               "model.window = " << window << " reaches " << window - 1 << " rows back, more than the " << local
                                 << " rows of each rank (data.sample_length / parallel.sp): a rank's window may "
                                    "only reach into its neighbour's rows");
  } else {
    PF_REQUIRE(ConfigError, within,
               split.checkpoint << ": model.window = " << window << " on " << sp << " ranks needs forwards of at least "
                                << sp << " x " << window - 1 << " positions (each rank's window reaches " << window - 1
                                << " rows into its neighbour's), more than the " << sample_length
                                << " of one training sample of this checkpoint (data.sample_length); run on "
                                << std::max<int64_t>(1, sample_length / std::max<int64_t>(1, window - 1))
                                << " rank(s) or fewer");
  }
}

void validate_training_window(const TrainConfig& cfg) {
  PF_REQUIRE(ConfigError, cfg.model.window <= cfg.data.sample_length,
             "model.window = " << cfg.model.window << " is longer than data.sample_length = " << cfg.data.sample_length
                               << ", the longest sample this run trains on (limit: model.window <= "
                                  "data.sample_length; a window of the sample length already reaches every "
                                  "position of the sample)");
}

std::vector<std::string> model_incompatibilities(const ModelConfig& a, const ModelConfig& b,
                                                 bool attention_may_differ) {
  std::vector<std::string> out;
  auto cmp = [&](const char* key, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(std::string("model.") + key + ": " + x + " in the checkpoint, " + y + " now");
  };
  auto num = [](auto v) { return std::to_string(v); };
  cmp("vocab", num(a.vocab), num(b.vocab));
  cmp("layers", num(a.layers), num(b.layers));
  cmp("width", num(a.width), num(b.width));
  cmp("heads", num(a.heads), num(b.heads));
  cmp("ffn", num(a.ffn), num(b.ffn));
  cmp("objective", objective_name(a.objective), objective_name(b.objective));
  cmp("positional", positional_name(a.positional), positional_name(b.positional));
  cmp("window", num(a.window), num(b.window));
  if (a.attention == AttentionKind::Exp && b.attention == AttentionKind::Exp) {
    cmp("exp_key_norm", a.exp_key_norm ? "true" : "false", b.exp_key_norm ? "true" : "false");
    if (attention_may_differ && a.features != b.features)  // (else compared below)
      out.push_back("model.features: " + num(a.features) + " in the checkpoint, " + num(b.features) +
                    " now (exp trains its feature map: the number of features is the shape of a parameter)");
  }
  if (!attention_may_differ) {
    cmp("attention", attention_kind_name(a.attention), attention_kind_name(b.attention));
    if (a.attention != AttentionKind::Softmax) {
      cmp("features", num(a.features), num(b.features));
      cmp("redraw_interval", num(a.redraw_interval), num(b.redraw_interval));
      cmp("projection", projection_name(a.projection), projection_name(b.projection));
      cmp("feature_scaling", feature_scaling_name(a.feature_scaling), feature_scaling_name(b.feature_scaling));
      cmp("feature_draw", num(a.feature_draw), num(b.feature_draw));
    }
  }
  cmp("seed", num(a.seed), num(b.seed));
  return out;
}

namespace {

// "<path>: <what>:" and each difference on a line of its own.
void require_none(const std::string& path, const std::vector<std::string>& diff, const char* what) {
  if (diff.empty()) return;
  std::string msg = path + ": " + what + ":";
  for (const auto& d : diff) msg += "\n  " + d;
  throw ConfigError(msg);
}

}  // namespace

void require_same_model(const std::string& path, const ModelConfig& stored, const ModelConfig& current) {
  require_none(path, model_incompatibilities(stored, current, false),
               "checkpoint is from an incompatible model configuration");
}

void require_loadable_model(const std::string& path, const ModelConfig& stored, const ModelConfig& current) {
  require_none(path, model_incompatibilities(stored, current, true), "cannot load these parameters into this model");
}

}  // namespace pf
