// Embeddings of one protein under a checkpoint, the sequence split over the
// ranks of the model's sequence group as for scoring.
//   input r_1 .. r_n <end> at positions 0..n (a data.mode = "single" sample)
//   hidden states [n + 1, C] of the chosen layer (PerformerModel::hidden_states:
//   0 the embedding plus positions, l the output of layer l, L + 1 the final
//   LayerNorm, the default), of which the n residue rows are used:
//   mean     [C]     the mean over the residue rows (summed in double)
//   residues [n, C]  the residue rows themselves, when asked for
// Results are on rank 0 of `comm` (the sums reach it through the
// communicator's reduce, the residue rows through its gatherv).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/comm.h"

namespace pf {

struct SequenceEmbedding {
  std::vector<float> mean;      // [C]
  std::vector<float> residues;  // [n, C], when per_residue
};

// "final" -> layers + 1, otherwise an integer in [0, layers + 1]; ConfigError
// naming --layer otherwise.
int64_t parse_embedding_layer(const std::string& text, int64_t layers);

// Collective over `comm` (the model's sequence group; a local communicator
// for a model on one rank).
SequenceEmbedding embed_sequence(PerformerModel& model, const std::vector<uint8_t>& residues, int64_t layer,
                                 bool per_residue, int64_t step, Communicator& comm);

// Several proteins embedded together as one packed sample (each attends to
// itself only, at positions 0..n): the embeddings embed_sequence gives each
// (to fp32 rounding), in one forward. Collective like embed_sequence.
std::vector<SequenceEmbedding> embed_packed(PerformerModel& model, const std::vector<std::vector<uint8_t>>& proteins,
                                            int64_t layer, bool per_residue, int64_t step, Communicator& comm);

}  // namespace pf
