// Scores given a context of homologs: see context_scoring.h.
#include "launch/infer/context_scoring.h"

#include <algorithm>

#include "data/vocab.h"
#include "launch/core/model_rules.h"
#include "launch/infer/sequence_split.h"
#include "runtime/check.h"

namespace pf {
namespace {

void check_context(const ModelConfig& cfg, const std::vector<std::vector<uint8_t>>& context) {
  PF_REQUIRE(ConfigError, cfg.causal(),
             "scoring with a context needs a causal model (model.objective = \"clm\"): a masked-LM model has no "
             "likelihood of a query to condition on its relatives");
  PF_REQUIRE(ConfigError, !context.empty(), "the context holds no protein");
  for (size_t k = 0; k < context.size(); ++k)
    PF_REQUIRE(ConfigError, !context[k].empty(), "context protein " << k + 1 << " is empty");
}

}  // namespace

SequenceScore score_in_context_one_pass(PerformerModel& model, const std::vector<std::vector<uint8_t>>& context,
                                        const std::vector<uint8_t>& query, const ScoreOptions& o, Communicator& comm) {
  const ModelConfig& cfg = model.config();
  check_context(cfg, context);
  PF_REQUIRE(ValueError, !query.empty(), "cannot score an empty sequence");
  const int rank = comm.rank(), size = comm.size();
  // The family sample: every context member with its <end>, then the query,
  // each joining the state of the one before it.
  PackedRow row;
  for (const std::vector<uint8_t>& c : context) {
    std::vector<int32_t> member(c.begin(), c.end());
    member.push_back(Vocab::kEnd);
    row.add(member, row.count() > 0);
  }
  const int64_t qs = row.size(), n = static_cast<int64_t>(query.size());
  row.add(std::vector<int32_t>(query.begin(), query.end()), true);
  const int64_t N = row.size(), V = cfg.vocab;
  // Fewer positions than a split over the ranks needs (packed_row_minimum):
  // a filler sequence after the query, attended by nothing else; its rows
  // predict nothing.
  const int64_t filler = packed_row_minimum(cfg, size) - N;
  if (filler > 0) row.add(std::vector<int32_t>(static_cast<size_t>(filler), Vocab::kPad));
  const std::vector<int32_t>& tokens = row.tokens;
  const PositionBlock blk = rank_block(row.size(), rank, size);
  ModelInput in;
  in.batch = 1;
  in.n = blk.size();
  in.offset = blk.begin;
  // Row i predicts token i + 1; the query's rows and the row before it are scored.
  for (int64_t i = blk.begin; i < blk.end; ++i) {
    in.inputs.push_back(tokens[static_cast<size_t>(i)]);
    in.targets.push_back(i < qs - 1 || i >= N ? -1 : i + 1 < N ? tokens[static_cast<size_t>(i + 1)] : Vocab::kEnd);
  }
  in.packed.samples.push_back(row.pieces(blk));
  std::vector<float> logits;
  model.forward(in, o.step, &logits);
  SequenceScore s;
  s.reset(n + 1);
  for (int64_t i = std::max(blk.begin, qs - 1); i < std::min(blk.end, N); ++i)
    s.set(i - (qs - 1), logits.data() + (i - blk.begin) * V, V, in.targets[static_cast<size_t>(i - blk.begin)]);
  finish_sequence_score(s, std::vector<char>(static_cast<size_t>(n + 1), 1), comm, model_tracker(model));
  return s;
}

ContextScorer::ContextScorer(PerformerModel& model, const ExecContext& ctx, std::vector<std::vector<uint8_t>> context,
                             const ScoreOptions& options, Communicator& comm, bool cached, int64_t streams)
    : model_(model), ctx_(ctx), context_(std::move(context)), options_(options), comm_(comm), streams_(streams) {
  check_context(model.config(), context_);
  PF_REQUIRE(ValueError, streams >= 1, "context scoring streams must be >= 1, got " << streams);
  // Exact softmax without a window keeps every context key: one pass per query.
  if (!cached || attends_to_every_key(model.config())) return;
  // The context once, in a stream of its own; its state and last logits kept.
  RecurrentPerformer once(model, ctx, 1, options.step);
  first_logits_.assign(static_cast<size_t>(model.config().vocab), 0.f);
  for (size_t k = 0; k < context_.size(); ++k) {
    once.set_position(0);
    for (size_t i = 0; i <= context_[k].size(); ++i) {
      const int32_t t = i < context_[k].size() ? context_[k][i] : Vocab::kEnd;
      const bool last = k + 1 == context_.size() && i == context_[k].size();
      once.step(&t, last ? first_logits_.data() : nullptr);
      ++context_tokens_run_;
    }
  }
  state_ = once.save_stream(0);
  cached_ = true;
}

int64_t ContextScorer::context_tokens() const {
  int64_t t = 0;
  for (const std::vector<uint8_t>& c : context_) t += static_cast<int64_t>(c.size()) + 1;
  return t;
}

std::vector<SequenceScore> ContextScorer::score(const std::vector<std::vector<uint8_t>>& queries) {
  for (const std::vector<uint8_t>& q : queries) PF_REQUIRE(ValueError, !q.empty(), "cannot score an empty sequence");
  if (cached()) return score_cached(queries);
  std::vector<SequenceScore> out;
  for (const std::vector<uint8_t>& q : queries) {
    out.push_back(score_in_context_one_pass(model_, context_, q, options_, comm_));
    context_tokens_run_ += context_tokens();
  }
  return out;
}

std::vector<SequenceScore> ContextScorer::score_cached(const std::vector<std::vector<uint8_t>>& queries) {
  const int rank = comm_.rank(), size = comm_.size();
  const int64_t V = model_.config().vocab, Q = static_cast<int64_t>(queries.size());
  std::vector<SequenceScore> out(static_cast<size_t>(Q));
  for (int64_t q = 0; q < Q; ++q) out[static_cast<size_t>(q)].reset(static_cast<int64_t>(queries[q].size()) + 1);
  // This rank's queries (q = rank, rank + size, ...), B streams at a time
  // (no more streams than queries: every stream costs a step).
  std::vector<int64_t> mine;
  for (int64_t q = rank; q < Q; q += size) mine.push_back(q);
  const int64_t B = std::max<int64_t>(1, std::min<int64_t>(streams_, static_cast<int64_t>(mine.size())));
  if (!recurrent_ || recurrent_->batch() != B)
    recurrent_ = std::make_unique<RecurrentPerformer>(model_, ctx_, B, options_.step);
  std::vector<int32_t> tokens(static_cast<size_t>(B));
  std::vector<float> logits(static_cast<size_t>(B * V));
  for (size_t first = 0; first < mine.size(); first += static_cast<size_t>(B)) {
    const size_t count = std::min(mine.size() - first, static_cast<size_t>(B));
    int64_t longest = 0;
    for (size_t b = 0; b < count; ++b) {
      const std::vector<uint8_t>& r = queries[static_cast<size_t>(mine[first + b])];
      recurrent_->load_stream(static_cast<int64_t>(b), state_);
      out[static_cast<size_t>(mine[first + b])].set(0, first_logits_.data(), V, r[0]);
      longest = std::max<int64_t>(longest, static_cast<int64_t>(r.size()));
    }
    recurrent_->set_position(0);
    for (int64_t i = 0; i < longest; ++i) {
      for (int64_t b = 0; b < B; ++b) {
        const bool live = b < static_cast<int64_t>(count) &&
                          i < static_cast<int64_t>(queries[static_cast<size_t>(mine[first + b])].size());
        tokens[static_cast<size_t>(b)] =
            live ? queries[static_cast<size_t>(mine[first + b])][static_cast<size_t>(i)] : Vocab::kEnd;
      }
      recurrent_->step(tokens.data(), logits.data());
      for (size_t b = 0; b < count; ++b) {
        const std::vector<uint8_t>& r = queries[static_cast<size_t>(mine[first + b])];
        const int64_t n = static_cast<int64_t>(r.size());
        if (i >= n) continue;
        const int32_t target = i + 1 < n ? r[static_cast<size_t>(i + 1)] : Vocab::kEnd;
        out[static_cast<size_t>(mine[first + b])].set(i + 1, logits.data() + b * static_cast<size_t>(V), V, target);
      }
    }
  }
  for (int64_t q = 0; q < Q; ++q)
    finish_sequence_score(out[static_cast<size_t>(q)], std::vector<char>(queries[q].size() + 1, 1), comm_,
                          model_tracker(model_));
  return out;
}

}  // namespace pf
