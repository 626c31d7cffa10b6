// Model configuration: the shape of the Performer, its attention kernel and
// objective. Every field has a documented default (docs/configuration.md) and
// validate() names the offending key.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/random_features/random_features.h"
#include "runtime/dtype.h"

namespace pf {

enum class AttentionKind { Favor, Relu, Softmax, Elu, Exp };
enum class Objective { CausalLM, MaskedLM };
enum class PositionalEncoding { Sinusoidal, None };
// The arithmetic of the CUDA attention kernels' tile products (the CPU
// computes in fp32 whatever is asked): Auto picks bf16 for bf16 models and
// TF32 otherwise; Fp32 is exact fp32 (the SIMT kernels).
enum class AttentionMath { Auto, Fp32, Tf32, Bf16 };

const char* attention_kind_name(AttentionKind k);          // "favor", "relu", "softmax", "elu", "exp"
const char* objective_name(Objective o);                   // "clm", "mlm"
const char* positional_name(PositionalEncoding p);         // "sinusoidal", "none"
const char* attention_math_name(AttentionMath a);          // "auto", "fp32", "tf32", "bf16"
const char* projection_name(ProjectionKind k);             // "orthogonal", "iid"
const char* feature_scaling_name(FeatureScaling s);        // "chi", "sqrt_d"
AttentionKind parse_attention_kind(const std::string& s);  // ConfigError naming the text
Objective parse_objective(const std::string& s);
PositionalEncoding parse_positional(const std::string& s);
AttentionMath parse_attention_math(const std::string& s);
DType parse_model_dtype(const std::string& s);  // f32, bf16, f16; ConfigError otherwise

// Token ids the objectives need (they come from the data vocabulary, which the
// model does not depend on).
struct TokenIds {
  int32_t pad = 0;            // never a target, never masked
  int32_t mask = 2;           // MLM replacement token
  int32_t first_residue = 4;  // residues are [first_residue, first_residue + residues)
  int32_t residues = 25;      // MLM random replacements are drawn from these
};

struct ModelConfig {
  int64_t vocab = 29;  // token vocabulary size (data vocabulary)
  int64_t layers = 2;
  int64_t width = 128;    // model width C
  int64_t heads = 4;      // attention heads H (width % heads == 0)
  int64_t ffn = 512;      // FFN hidden width F
  int64_t features = 64;  // random features m (favor, relu), trained ones (exp); elu: must equal the head dim (m = d)
  AttentionKind attention = AttentionKind::Favor;
  // exp only: keys (and queries, where it cancels) keep FAVOR+'s -|x|^2/2 term.
  bool exp_key_norm = false;
  Objective objective = Objective::CausalLM;  // causal LM -> causal attention; MLM -> bidirectional
  PositionalEncoding positional = PositionalEncoding::Sinusoidal;
  int64_t redraw_interval = 0;  // redraw random features every k steps (0: never)
  // Which independent draw of random features to use: the projection of layer
  // l at redraw index r is keyed (seed, l, r + feature_draw * 2^32). 0 in
  // training; other values re-draw the features of a trained model at
  // evaluation without touching the parameters (which seed also keys).
  int64_t feature_draw = 0;
  ProjectionKind projection = ProjectionKind::Orthogonal;
  FeatureScaling feature_scaling = FeatureScaling::ChiNorms;
  int64_t chunk = 128;  // chunk size of the causal linear-attention kernels
  // > 0: a local window of exact softmax attention over the `window` nearest
  // positions (causal: i - window + 1 .. i). With softmax it is the whole
  // attention; with a linear kind every head also runs the linear kernel over
  // the whole context, and its output is mixed with the window's by a trained
  // per-head gate, o = (1 - s_h) o_linear + s_h o_window, s_h = sigmoid(attn.gate[h])
  // (kernels/gated_mix). Across ranks (sp > 1) a rank takes the window - 1
  // rows before its slice (and after, bidirectional) from its neighbours:
  // window - 1 must not exceed the local rows (model/attention_window.cc).
  int64_t window = 0;
  bool checkpoint_activations = false;  // keep only each layer's input; recompute in the backward
  // Mixed precision: f32 (default), bf16 or f16. With bf16/f16 the GEMMs take
  // 16-bit operands (a 16-bit copy of the fp32 master weights, refreshed every
  // step, and 16-bit copies of their activation inputs, which are what the
  // backward keeps) and accumulate in fp32; layer norms, softmax/feature maps,
  // attention states, residuals, the loss and every gradient stay fp32.
  DType dtype = DType::f32;
  // The attention kernels' tile products on CUDA (sm_80+): Auto (bf16
  // operands for bf16 models, TF32 for f32 and f16 ones), or one of them for
  // every dtype; Fp32 keeps exact fp32 products. Parameters, checkpoints and
  // the CPU do not depend on it.
  AttentionMath attention_math = AttentionMath::Auto;
  double init_std = 0.02;  // std of weight initialisation
  double mlm_probability = 0.15;
  uint64_t seed = 1234;  // parameters, random features and MLM masks
  TokenIds tokens;

  int64_t head_dim() const { return width / heads; }
  bool causal() const { return objective == Objective::CausalLM; }
  // A linear kind with a local softmax window beside it (attn.gate parameters).
  bool hybrid() const { return window > 0 && attention != AttentionKind::Softmax; }
  // Throws ConfigError naming the key ("model.heads", ...) and the values.
  void validate() const;
};

}  // namespace pf
