#include "launch/bench/flops.h"

namespace pf::bench {

double favor_flop(int64_t heads, int64_t n, int64_t d, int64_t m, int64_t C, bool causal) {
  const double D1 = static_cast<double>(d + 1), md = static_cast<double>(m) * d;
  const double fwd = 4 * md + 4 * m * D1 + (causal ? 2.0 * C * (m + D1) : 0.0);
  const double bwd = 4 * md + 8 * m * D1 + (causal ? 2 * md + 2.0 * C * (3 * m + D1 + d) : 0.0) + 4 * md;
  return (fwd + bwd) * static_cast<double>(n) * heads;
}

StepFlop training_step_flop(const ModelConfig& cfg, int64_t B, int64_t n_local) {
  const double T = static_cast<double>(B) * n_local, C = cfg.width, F = cfg.ffn, V = cfg.vocab;
  const double per_layer_weights = 4 * C * C + 2 * C * F;  // qkv, output projection, two FFN matrices
  StepFlop f;
  f.gemm = 6 * T * (cfg.layers * per_layer_weights + C * V);
  const int64_t heads = B * cfg.heads, D = cfg.head_dim();
  if (cfg.attention == AttentionKind::Softmax) {
    const double n = static_cast<double>(n_local), pairs = cfg.causal() ? 0.5 : 1.0;
    f.attention = cfg.layers * heads * 12.0 * n * n * D * pairs;
  } else {
    f.attention = cfg.layers * favor_flop(heads, n_local, D, cfg.features, cfg.chunk, cfg.causal());
  }
  return f;
}

}  // namespace pf::bench
