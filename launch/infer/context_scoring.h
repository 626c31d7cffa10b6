// Scores of query proteins given a context of homologs, as a model trained
// with data.mode = "family" reads a family (docs/model.md#family-contexts):
//   context   members c_1..c_K, each its residues then <end>, positions
//             restarting at 0 per member, one attention state running across
//             them all
//   query     r_1..r_n after the context as the next member (positions 0..n):
//             r_1 is predicted from the context's last <end>, r_2..r_n and the
//             closing <end> from the query's own rows
// logprob [n + 1] as in launch/infer/scoring.h (slot 0: r_1, slot n: <end>).
// Two ways to the same numbers (causal models only):
//   cached    linear kernels (FAVOR+, ReLU, elu + 1, exp): the context runs
//             once through the recurrent form (model/recurrent.h); the state
//             after its last token is kept and loaded into every query's
//             stream, so a query costs O(n) whatever the context's length.
//             Queries are dealt to the ranks in turn, each rank running the
//             context once.
//   one pass  any kernel, exact softmax included: context + query as one
//             family sample, split over the ranks of `comm` like a long
//             protein; the context runs again for every query.
// `comm` is the model's sequence group (a local communicator for a model on
// one rank): the results reach rank 0 through its reduce.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "launch/infer/scoring.h"
#include "model/model.h"
#include "model/recurrent.h"
#include "runtime/comm.h"

namespace pf {

// One query given the context, in one pass over context + query. Collective
// over `comm`; the result on rank 0 (like score_sequence).
SequenceScore score_in_context_one_pass(PerformerModel& model, const std::vector<std::vector<uint8_t>>& context,
                                        const std::vector<uint8_t>& query, const ScoreOptions& options,
                                        Communicator& comm);

class ContextScorer {
 public:
  // Runs the context once (cached: the linear state and, with a window, the
  // window's last keys and values) or keeps it for one pass per query
  // (softmax without a window, or cached = false). ConfigError for a masked-LM model (no
  // causal likelihood to condition) or an empty context member.
  ContextScorer(PerformerModel& model, const ExecContext& ctx, std::vector<std::vector<uint8_t>> context,
                const ScoreOptions& options, Communicator& comm, bool cached = true, int64_t streams = 8);
  // The queries given the context, in order. Collective over `comm`; the
  // results on rank 0 (empty scores elsewhere).
  std::vector<SequenceScore> score(const std::vector<std::vector<uint8_t>>& queries);
  bool cached() const { return cached_; }
  // Tokens of the context run through the model so far, on this rank: the
  // context's length once when cached, once per query otherwise.
  int64_t context_tokens_run() const { return context_tokens_run_; }
  int64_t context_tokens() const;

 private:
  std::vector<SequenceScore> score_cached(const std::vector<std::vector<uint8_t>>& queries);
  PerformerModel& model_;
  ExecContext ctx_;
  std::vector<std::vector<uint8_t>> context_;
  ScoreOptions options_;
  Communicator& comm_;
  int64_t streams_ = 1;
  bool cached_ = false;
  std::unique_ptr<RecurrentPerformer> recurrent_;  // the queries' streams, made when they are known
  std::vector<std::vector<float>> state_;          // after the context's last token
  std::vector<float> first_logits_;                // [V]: predict a query's first residue
  int64_t context_tokens_run_ = 0;
};

}  // namespace pf
