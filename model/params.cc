#include "model/params.h"

#include <algorithm>
#include <cmath>

#include "model/model.h"
#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {

int64_t ParamLayout::add(const std::string& name, Shape shape, bool decay) {
  ParamSlice s;
  s.name = name;
  s.numel = shape_numel(shape);
  s.shape = std::move(shape);
  s.offset = total_;
  s.decay = decay;
  total_ += s.numel;
  slices_.push_back(std::move(s));
  return slices_.back().offset;
}

ParamLayout::ParamLayout(const ModelConfig& cfg) {
  const int64_t V = cfg.vocab, C = cfg.width, F = cfg.ffn;
  embedding_ = add("embedding", {V, C}, true);
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    LayerOffsets o{};
    o.begin = total_;
    o.ln1_g = add(p + "ln1.gamma", {C}, false);
    o.ln1_b = add(p + "ln1.beta", {C}, false);
    o.qkv_w = add(p + "qkv.weight", {3 * C, C}, true);
    o.qkv_b = add(p + "qkv.bias", {3 * C}, false);
    if (cfg.attention == AttentionKind::Exp)
      o.features_w = add(p + "attn.features", {cfg.heads, cfg.features, cfg.head_dim()}, false);
    if (cfg.hybrid()) o.gate = add(p + "attn.gate", {cfg.heads}, false);
    o.out_w = add(p + "out.weight", {C, C}, true);
    o.out_b = add(p + "out.bias", {C}, false);
    o.ln2_g = add(p + "ln2.gamma", {C}, false);
    o.ln2_b = add(p + "ln2.beta", {C}, false);
    o.ffn1_w = add(p + "ffn1.weight", {F, C}, true);
    o.ffn1_b = add(p + "ffn1.bias", {F}, false);
    o.ffn2_w = add(p + "ffn2.weight", {C, F}, true);
    o.ffn2_b = add(p + "ffn2.bias", {C}, false);
    o.end = total_;
    layers_.push_back(o);
  }
  final_g_ = add("final_ln.gamma", {C}, false);
  final_b_ = add("final_ln.beta", {C}, false);
}

const ParamSlice& ParamLayout::find(const std::string& name) const {
  for (const auto& s : slices_)
    if (s.name == name) return s;
  PF_REQUIRE(ValueError, false, "no parameter named '" << name << "'");
  return slices_.front();
}

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void init_parameters(const ModelConfig& cfg, const ParamLayout& layout, float* params) {
  const double residual_std = cfg.init_std / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  // Keyed by the slice's index among the slices other than attn.features and
  // attn.gate, so that exp and the windowed models draw every other tensor as
  // the kinds without them do.
  uint64_t key = 0;
  for (const ParamSlice& s : layout.slices()) {
    float* p = params + s.offset;
    if (ends_with(s.name, ".attn.features")) continue;  // below
    if (ends_with(s.name, ".attn.gate")) {
      std::fill(p, p + s.numel, 0.0f);
      continue;
    }
    const uint64_t si = key++;
    if (ends_with(s.name, ".gamma")) {
      for (int64_t i = 0; i < s.numel; ++i) p[i] = 1.0f;
    } else if (ends_with(s.name, ".beta") || ends_with(s.name, ".bias")) {
      for (int64_t i = 0; i < s.numel; ++i) p[i] = 0.0f;
    } else {
      const bool residual = ends_with(s.name, "out.weight") || ends_with(s.name, "ffn2.weight");
      const double std = residual ? residual_std : cfg.init_std;
      fill_normal(p, s.numel, KeyedRandom(cfg.seed, 0x9a7a3e7e5ull, si), std);
    }
  }
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const int64_t at = layout.layer(l).features_w;
    if (at < 0) continue;
    const std::vector<float> w = layer_projection(cfg, l, 0);
    const int64_t per_head = static_cast<int64_t>(w.size());
    for (int64_t h = 0; h < cfg.heads; ++h) std::copy(w.begin(), w.end(), params + at + h * per_head);
  }
}

std::vector<float> carry_parameters(const ModelConfig& cfg, const ParamLayout& to, const ParamLayout& from,
                                    const std::vector<float>& values, std::vector<std::string>* fresh) {
  PF_REQUIRE(ValueError, static_cast<int64_t>(values.size()) == from.total(),
             "carry_parameters: " << values.size() << " values for a layout of " << from.total());
  // The tensor of `from` behind each of `to` (null: not there).
  std::vector<const ParamSlice*> source;
  for (const ParamSlice& s : to.slices()) {
    const auto it =
        std::find_if(from.slices().begin(), from.slices().end(), [&](const ParamSlice& f) { return f.name == s.name; });
    source.push_back(it == from.slices().end() ? nullptr : &*it);
    if (!source.back() && fresh) fresh->push_back(s.name);
  }
  std::vector<float> out(static_cast<size_t>(to.total()));
  // The initialisation only where a tensor is missing (it draws every tensor).
  if (std::find(source.begin(), source.end(), nullptr) != source.end()) init_parameters(cfg, to, out.data());
  for (size_t i = 0; i < source.size(); ++i) {
    const ParamSlice& s = to.slices()[i];
    if (!source[i]) continue;
    PF_REQUIRE(
        ValueError, source[i]->numel == s.numel,
        "carry_parameters: " << s.name << " holds " << source[i]->numel << " values there, " << s.numel << " here");
    std::copy(values.begin() + source[i]->offset, values.begin() + source[i]->offset + s.numel, out.begin() + s.offset);
  }
  return out;
}

std::string fresh_parameters_text(const std::vector<std::string>& fresh) {
  // "layer<l>.<rest>" grouped by <rest>, in order of first appearance.
  std::vector<std::pair<std::string, std::string>> groups;
  for (const std::string& name : fresh) {
    std::string rest = name, layer;
    const size_t dot = name.find('.');
    if (name.rfind("layer", 0) == 0 && dot != std::string::npos) {
      layer = name.substr(5, dot - 5);
      rest = name.substr(dot + 1);
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == rest; });
    if (it == groups.end()) it = groups.insert(groups.end(), {rest, ""});
    if (!layer.empty()) it->second += (it->second.empty() ? "" : ", ") + layer;
  }
  std::string out;
  for (const auto& [rest, layers] : groups)
    out += (out.empty() ? "" : "; ") + rest + (layers.empty() ? "" : " of layer(s) " + layers);
  return out;
}

}  // namespace pf
