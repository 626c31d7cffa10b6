// Scores of one protein under a checkpoint, with the sequence split over the
// ranks of the model's sequence group (launch/infer/sequence_split.h).
//   residues r_1..r_n (tokens of data/vocab.h); per-position results
//   logprob [n + 1]: log P of residue 1..n, then of the closing <end>; NaN
//   where a position is not scored (on rank 0; other ranks get nothing).
//   top [n + 1]: 1 where the true token has the largest logit (the first of
//   equal ones, as training's accuracy counts), 0 where another has; NaN
//   where not scored.
// Causal models (exact log-likelihood, measure "log_likelihood"):
//   FirstResidue::Scored   input <end> r_1 .. r_n at positions 0..n: every
//                          residue and the closing <end> are predicted (n + 1
//                          terms); the leading <end> is the separator that
//                          precedes every protein in concatenated training
//                          samples (data.mode = "concat").
//   FirstResidue::Context  input r_1 .. r_n at positions 0..n-1, as a
//                          data.mode = "single" training sample: residues
//                          2..n and <end> are predicted (n terms), r_1 is
//                          context only. performer-eval computes this on the
//                          same sequences with data.mode = "single".
// Masked models (pseudo-log-likelihood, measure "pseudo_log_likelihood"):
//   input r_1 .. r_n <end>; for each residue position i, the input with r_i
//   replaced by <mask> predicts r_i (n terms, one forward per position);
//   `pll_batch_tokens` bounds the tokens of one forward on each rank, so
//   several masked copies share a forward.
// Log-probabilities are log-softmax of the fp32 logits, in double.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cross_entropy/cross_entropy.h"  // log_softmax_at
#include "model/model.h"
#include "runtime/comm.h"

namespace pf {

enum class FirstResidue { Scored, Context };
FirstResidue parse_first_residue(const std::string& text);  // "scored" | "context"; ConfigError otherwise

struct ScoreOptions {
  FirstResidue first_residue = FirstResidue::Scored;
  int64_t pll_batch_tokens = 16384;
  int64_t step = 0;  // the projection step
};

struct SequenceScore {
  std::vector<double> logprob;  // [n + 1] (rank 0)
  std::vector<double> top;      // [n + 1] (rank 0)
  double total = 0;             // sum of the scored terms (rank 0)
  int64_t scored = 0;           // number of scored terms
  double perplexity() const;    // exp(-total / scored)
  void reset(int64_t slots);    // logprob and top: `slots` zeros
  // logprob[slot] and top[slot] of one row of logits [V] and its target.
  void set(int64_t slot, const float* logits, int64_t V, int32_t target);
};

// "log_likelihood" (causal) or "pseudo_log_likelihood" (masked).
const char* score_measure(const ModelConfig& cfg);

// Collective over `comm`, the model's sequence group (all its ranks call it
// with the same residues; a one-rank model takes a local communicator). Every
// exchange goes through `comm` (its reduce), so it runs on the communicator's
// stream and under its watchdog like training's.
SequenceScore score_sequence(PerformerModel& model, const std::vector<uint8_t>& residues, const ScoreOptions& options,
                             Communicator& comm);

// Several proteins scored together as one packed sample (model/packed_layout.h:
// each attends to itself only), split over the ranks of `comm` like one long
// protein: the same scores as score_sequence on each (to fp32 rounding), in
// fewer, fuller forwards. Masked models mask position j of every protein
// longer than j in the same copy. Collective like score_sequence.
std::vector<SequenceScore> score_packed(PerformerModel& model, const std::vector<std::vector<uint8_t>>& proteins,
                                        const ScoreOptions& options, Communicator& comm);
// Rank 0's score from every rank's per-position values (logprob and top
// summed into rank 0 over `comm`; each position computed by one rank, zeros
// elsewhere); `scored` marks the positions that hold a term, the others
// become NaN. `tracker` stages the sums on a GPU communicator.
void finish_sequence_score(SequenceScore& s, const std::vector<char>& scored, Communicator& comm,
                           MemoryTracker& tracker);

// Tokens a protein of `residues` takes in a packed sample (its input length).
int64_t packed_score_tokens(const ModelConfig& cfg, int64_t residues, const ScoreOptions& options);

}  // namespace pf
