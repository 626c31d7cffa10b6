// Nominal FLOP counts of the benchmarks' work, the numerators of their
// "fraction of peak" figures. They count the algorithm's arithmetic once
// (work an implementation repeats, such as features remade in the backward or
// a checkpointed layer's second forward, is not counted again).
#pragma once

#include <cstdint>

#include "model/config.h"

namespace pf::bench {

// FAVOR+ forward + backward over `heads` heads of n positions (features,
// chunked causal or bidirectional linear attention, and their backward).
double favor_flop(int64_t heads, int64_t n, int64_t d, int64_t m, int64_t C, bool causal);

// One training step of a rank holding B x n_local tokens of `cfg`: the GEMMs
// of every linear layer and the output head (2 FLOPs per multiply-add, forward
// x1, backward x2) plus the attention core (favor_flop, or 4 n^2 D forward and
// 8 n^2 D backward per head for exact softmax, halved when causal).
struct StepFlop {
  double gemm = 0;       // linear layers and the output head
  double attention = 0;  // the attention core
  double total() const { return gemm + attention; }
};
StepFlop training_step_flop(const ModelConfig& cfg, int64_t B, int64_t n_local);

}  // namespace pf::bench
