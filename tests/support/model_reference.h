// float64 forward of the whole PerformerModel (model/model.h) on the host, for
// one rank holding whole sequences, composed of the kernels' float64
// references; for tests (whole-model gradient checks by finite differences).
//   params       [layout.total()]  the flat parameter buffer (model/params.h)
//   inputs, targets [B, n]          ModelInput (model/objective.h); targets -1 are ignored
//   projections  L x [m, D]         each layer's random projection (favor, relu;
//                                   empty for softmax), e.g. reference_projections(model, step)
//   logits       [B, n, V]          optional output
// Computes ids -> sqrt(C) E[ids] + pe(offset + i) -> L pre-LN blocks
// (x + Wo attn(LN1 x), then + W2 gelu(W1 LN2 .)) -> final LN -> h E^T -> the sum
// of the token cross-entropies over targets >= 0. Attention is evaluated
// without the kernels' log-scale stabilisers (they cancel mathematically):
// favor/relu through favor_attention_forward_ref, softmax through
// softmax_attention_forward_ref. O(L B H n^2 (m + D)) plus the projections.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/model.h"
#include "model/objective.h"

namespace pf::test {

// Returns the loss sum over the predicted tokens (the model's ForwardResult::loss_sum).
double reference_loss_sum(const ModelConfig& cfg, const std::vector<double>& params, const ModelInput& in,
                          const std::vector<std::vector<double>>& projections, std::vector<double>* logits = nullptr);

// Central finite differences of reference_loss_sum for every parameter
// element: g[i] = (L(p + h e_i) - L(p - h e_i)) / 2h, two forwards per element.
std::vector<double> reference_fd_gradient(const ModelConfig& cfg, const std::vector<double>& params,
                                          const ModelInput& in, const std::vector<std::vector<double>>& projections,
                                          double h);

// The model's projections at `step` as float64, one [m, D] per layer (empty
// vectors for softmax attention).
std::vector<std::vector<double>> reference_projections(PerformerModel& model, int64_t step);

}  // namespace pf::test
