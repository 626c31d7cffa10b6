#include "model/config.h"

#include <cmath>

#include "runtime/check.h"

namespace pf {

const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::Favor: return "favor";
    case AttentionKind::Relu: return "relu";
    case AttentionKind::Softmax: return "softmax";
    case AttentionKind::Elu: return "elu";
    case AttentionKind::Exp: return "exp";
  }
  return "?";
}
const char* objective_name(Objective o) { return o == Objective::CausalLM ? "clm" : "mlm"; }
const char* positional_name(PositionalEncoding p) {
  return p == PositionalEncoding::Sinusoidal ? "sinusoidal" : "none";
}

const char* attention_math_name(AttentionMath a) {
  switch (a) {
    case AttentionMath::Auto: return "auto";
    case AttentionMath::Fp32: return "fp32";
    case AttentionMath::Tf32: return "tf32";
    case AttentionMath::Bf16: return "bf16";
  }
  return "?";
}

const char* projection_name(ProjectionKind k) { return k == ProjectionKind::Iid ? "iid" : "orthogonal"; }

const char* feature_scaling_name(FeatureScaling s) { return s == FeatureScaling::ChiNorms ? "chi" : "sqrt_d"; }

AttentionKind parse_attention_kind(const std::string& s) {
  for (AttentionKind k :
       {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Softmax, AttentionKind::Elu, AttentionKind::Exp})
    if (s == attention_kind_name(k)) return k;
  PF_REQUIRE(ConfigError, false,
             "model.attention: unknown kernel '" << s << "' (expected favor, relu, softmax, elu or exp)");
  return AttentionKind::Favor;
}

Objective parse_objective(const std::string& s) {
  if (s == "clm") return Objective::CausalLM;
  if (s == "mlm") return Objective::MaskedLM;
  PF_REQUIRE(ConfigError, false, "model.objective: unknown objective '" << s << "' (expected clm or mlm)");
  return Objective::CausalLM;
}

PositionalEncoding parse_positional(const std::string& s) {
  if (s == "sinusoidal") return PositionalEncoding::Sinusoidal;
  if (s == "none") return PositionalEncoding::None;
  PF_REQUIRE(ConfigError, false, "model.positional: unknown encoding '" << s << "' (expected sinusoidal or none)");
  return PositionalEncoding::None;
}

AttentionMath parse_attention_math(const std::string& s) {
  for (AttentionMath a : {AttentionMath::Auto, AttentionMath::Fp32, AttentionMath::Tf32, AttentionMath::Bf16})
    if (s == attention_math_name(a)) return a;
  PF_REQUIRE(ConfigError, false,
             "model.attention_math: unknown arithmetic '" << s << "' (expected auto, fp32, tf32 or bf16)");
  return AttentionMath::Auto;
}

DType parse_model_dtype(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "bf16") return DType::bf16;
  if (s == "f16") return DType::f16;
  PF_REQUIRE(ConfigError, false, "model.dtype: unknown type '" << s << "' (expected f32, bf16 or f16)");
  return DType::f32;
}

namespace {

// Upper bounds of the shape keys. Far above any trainable model, they keep
// every tensor's element count (and its bytes) well inside int64: the largest
// parameter tensor is ffn x width <= 2^36, the model at most 2^10 layers of it.
constexpr int64_t kMaxLayers = int64_t{1} << 10;
constexpr int64_t kMaxWidth = int64_t{1} << 16;
constexpr int64_t kMaxFfn = int64_t{1} << 20;
constexpr int64_t kMaxFeatures = int64_t{1} << 16;
constexpr int64_t kMaxChunk = int64_t{1} << 20;

}  // namespace

void ModelConfig::validate() const {
  PF_REQUIRE(ConfigError, vocab >= 2, "model.vocab must be >= 2, got " << vocab);
  PF_REQUIRE(ConfigError, layers >= 1 && layers <= kMaxLayers,
             "model.layers = " << layers << " is out of range: must be in [1, " << kMaxLayers << "]");
  PF_REQUIRE(ConfigError, width >= 1 && width <= kMaxWidth,
             "model.width = " << width << " is out of range: must be in [1, " << kMaxWidth << "]");
  PF_REQUIRE(ConfigError, heads >= 1 && width % heads == 0,
             "model.heads must divide model.width: heads=" << heads << " width=" << width);
  PF_REQUIRE(ConfigError, ffn >= 1 && ffn <= kMaxFfn,
             "model.ffn = " << ffn << " is out of range: must be in [1, " << kMaxFfn << "]");
  PF_REQUIRE(ConfigError, attention == AttentionKind::Softmax || (features >= 1 && features <= kMaxFeatures),
             "model.features = " << features << " is out of range: must be in [1, " << kMaxFeatures << "]");
  PF_REQUIRE(ConfigError, attention != AttentionKind::Elu || features == head_dim(),
             "model.features = " << features
                                 << " with model.attention = \"elu\": elu(x) + 1 acts on the q and k rows "
                                    "themselves, so m is the head dimension: set model.features = "
                                 << head_dim() << " (model.width / model.heads)");
  PF_REQUIRE(ConfigError, redraw_interval >= 0, "model.redraw_interval must be >= 0, got " << redraw_interval);
  // exp trains its projections: nothing to redraw, no other draw to evaluate with.
  PF_REQUIRE(ConfigError, attention != AttentionKind::Exp || (redraw_interval == 0 && feature_draw == 0),
             "model.attention = \"exp\" trains its projections, so they are never redrawn: model.redraw_interval "
             "and model.feature_draw must be 0, got "
                 << redraw_interval << " and " << feature_draw);
  PF_REQUIRE(ConfigError, !exp_key_norm || attention == AttentionKind::Exp,
             "model.exp_key_norm applies to model.attention = \"exp\" only, not " << attention_kind_name(attention));
  PF_REQUIRE(ConfigError, feature_draw >= 0 && feature_draw < (int64_t{1} << 31),
             "model.feature_draw must be in [0, 2^31), got " << feature_draw);
  PF_REQUIRE(ConfigError, dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
             "model.dtype must be f32, bf16 or f16, got " << dtype_name(dtype));
  PF_REQUIRE(ConfigError, window >= 0 && window < (int64_t{1} << 40),
             "model.window = " << window << " is out of range: must be in [0, 2^40) (0: no local window)");
  PF_REQUIRE(ConfigError, chunk >= 1 && chunk <= kMaxChunk,
             "model.chunk = " << chunk << " is out of range: must be in [1, " << kMaxChunk << "]");
  PF_REQUIRE(ConfigError, std::isfinite(init_std) && init_std > 0,
             "model.init_std = " << init_std << " is out of range: must be finite and > 0");
  PF_REQUIRE(ConfigError, mlm_probability > 0 && mlm_probability < 1,
             "model.mlm_probability must be in (0, 1), got " << mlm_probability);
  PF_REQUIRE(ConfigError,
             tokens.first_residue >= 0 && tokens.first_residue + tokens.residues <= vocab && tokens.residues >= 1 &&
                 tokens.mask >= 0 && tokens.mask < vocab,
             "model token ids do not fit the vocabulary of " << vocab);
}

}  // namespace pf
