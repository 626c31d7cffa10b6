// Drawing the next token from a causal model's logits [V].
//   candidates: the residue tokens (data/vocab.h: 4..28) and, when allowed,
//               <end>; <pad>, <mask> and <unk> are never drawn
//   p_v ∝ exp(logit_v / temperature) over the candidates (in double);
//   temperature 0 is greedy (the largest logit, the lowest id on a tie)
//   candidates sorted by p descending (ties: lower id first); top_k keeps the
//   first k (0: all); top_p keeps the shortest prefix whose mass reaches
//   top_p (1: all); the kept mass is renormalised
//   the token is the first candidate whose cumulative mass exceeds u * kept
//   mass, for a uniform u in [0, 1) supplied by the caller.
// The caller draws u from a counter-based generator keyed by (seed, protein,
// position) (runtime/random.h), so a seed gives the same proteins on every
// machine whose logits are the same bits; logits that differ in their last
// bits (another BLAS, another summation order) can change a draw that falls
// on a boundary.
#pragma once

#include <cstdint>

#include "runtime/random.h"

namespace pf {

struct SamplingOptions {
  double temperature = 1.0;
  int64_t top_k = 0;      // 0: no limit
  double top_p = 1.0;     // 1: no limit
  bool allow_end = true;  // false: always a residue (benchmarks of a fixed length)
};

// ConfigError naming --temperature, --top-k or --top-p.
void validate_sampling(const SamplingOptions& o);

int32_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, double u);

// The uniform of protein `protein`'s token number `index` under `seed`.
inline double sampling_uniform(uint64_t seed, uint64_t protein, uint64_t index) {
  return KeyedRandom(seed, 0x67656e657261746full, protein).uniform(index);
}

}  // namespace pf
