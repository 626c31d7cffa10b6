// The training objectives: what the model reads and what it must predict at
// each of this rank's positions. Everything is keyed by global coordinates
// (seed, step, sample, global position), never by rank, so a sample split over
// any number of ranks gets the same inputs and targets.
//
// Causal LM: input = tokens; the target at global position p is the token at
// p + 1 (the loader's lookahead token for the last local position), ignored
// (-1) when that token is padding or past the end of the sample.
// Masked LM: each residue position is selected with probability
// mlm_probability by a hash of (seed, step, sample, position); a selected
// position's target is its token, and its input becomes the mask token (80%),
// a random residue (10%) or stays unchanged (10%). Other targets are -1.
// Packed batches (model/packed_layout.h): no target crosses a sequence (the
// last row of a piece followed by another piece predicts nothing; the loader
// gives <pad> as the lookahead where the next rank's first row starts a
// sequence), and the masked-LM draw of a row is keyed by (seed, step, its
// sequence's key, its position inside the sequence) instead of the sample
// and the sample position, so masks do not depend on the packing.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/packed_layout.h"

namespace pf {

// This rank's slice of a batch of samples, as the data loader hands it over.
struct TokenBatch {
  int64_t batch = 0;    // samples B
  int64_t n = 0;        // positions per sample on this rank
  int64_t offset = 0;   // global position of the first local position
  std::vector<int32_t> tokens;     // [B, n]
  std::vector<int32_t> lookahead;  // [B] token at global position offset + n, or -1 at the end
  std::vector<uint64_t> sample_ids;  // [B] global sample index (keys the MLM mask; packed: the pieces' keys do)
  PackedLayout packed;               // the sequences of a packed batch; empty otherwise
};

struct ModelInput {
  int64_t batch = 0, n = 0, offset = 0;
  std::vector<int32_t> inputs;   // [B, n]
  std::vector<int32_t> targets;  // [B, n], -1 = not predicted
  PackedLayout packed;           // as in the TokenBatch
  int64_t predicted() const;     // number of targets != -1
};

ModelInput make_model_input(const ModelConfig& cfg, const TokenBatch& batch, int64_t step);

}  // namespace pf
