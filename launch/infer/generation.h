// Generating one protein with the recurrent form of a causal model
// (model/recurrent.h): <end> at position 0 (the separator that precedes
// every protein in concatenated training samples), then the prompt's
// residues, then one sampled token per step until <end> is drawn or
// max_length residues have been generated. Without the leading <end>
// (models trained with data.mode = "packed" or "single", which never predict
// a protein's first residue) the prompt's first residue is at position 0,
// and a prompt is required. Memory: the recurrent state and the protein's
// own text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/output_path.h"
#include "model/sampling.h"
#include "model/recurrent.h"

namespace pf {

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t max_length = 1000;  // generated residues, not counting the prompt
  uint64_t seed = 0;
  bool leading_end = true;  // false: the protein starts with the prompt at position 0
};

struct GeneratedProtein {
  std::string residues;       // the prompt's letters followed by the generated ones
  int64_t prompt_length = 0;  // residues of the prompt
  bool ended = false;         // <end> was drawn (else max_length was reached)
};

// Protein number `protein` (keys its random draws together with the seed).
GeneratedProtein generate_protein(RecurrentPerformer& model, const std::vector<uint8_t>& prompt,
                                  const GenerateOptions& options, uint64_t protein);

// What performer-generate writes: FASTA whose first header carries its fields
// (">ID length=N stop=... prompt=... prompt_length=K seed=S"), for the
// output-path rule (data/output_path.h).
OutputKind generated_fasta_kind();

}  // namespace pf
