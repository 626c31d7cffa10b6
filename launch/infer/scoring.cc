#include "launch/infer/scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "data/vocab.h"
#include "launch/infer/sequence_split.h"
#include "runtime/check.h"

namespace pf {
namespace {

struct Ranks {
  int rank = 0, size = 1;
  explicit Ranks(const Communicator& comm) : rank(comm.rank()), size(comm.size()) {}
};

}  // namespace

void finish_sequence_score(SequenceScore& s, const std::vector<char>& scored, Communicator& comm,
                           MemoryTracker& tracker) {
  sum_to_root(s.logprob, comm, tracker);
  sum_to_root(s.top, comm, tracker);
  s.scored = 0;
  s.total = 0;
  for (size_t i = 0; i < s.logprob.size(); ++i) {
    if (scored[i]) {
      s.total += s.logprob[i];
      ++s.scored;
    } else {
      s.logprob[i] = s.top[i] = std::numeric_limits<double>::quiet_NaN();
    }
  }
}

namespace {

SequenceScore score_causal(PerformerModel& model, const std::vector<uint8_t>& r, const ScoreOptions& o,
                           Communicator& comm) {
  const Ranks ranks(comm);
  const int64_t n = static_cast<int64_t>(r.size()), V = model.config().vocab;
  // Input tokens and, per input position, the slot of logprob it predicts.
  std::vector<int32_t> tokens;
  const bool lead = o.first_residue == FirstResidue::Scored;
  if (lead) tokens.push_back(Vocab::kEnd);
  for (uint8_t t : r) tokens.push_back(t);
  const int64_t N = static_cast<int64_t>(tokens.size());
  auto target_of = [&](int64_t i) -> int32_t { return i + 1 < N ? tokens[i + 1] : Vocab::kEnd; };
  auto slot_of = [&](int64_t i) { return lead ? i : i + 1; };

  const PositionBlock blk = rank_block(N, ranks.rank, ranks.size);
  ModelInput in;
  in.batch = 1;
  in.n = blk.size();
  in.offset = blk.begin;
  for (int64_t i = blk.begin; i < blk.end; ++i) {
    in.inputs.push_back(tokens[i]);
    in.targets.push_back(target_of(i));
  }
  std::vector<float> logits;
  model.forward(in, o.step, &logits);

  SequenceScore s;
  s.reset(n + 1);
  std::vector<char> scored(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < N; ++i) scored[slot_of(i)] = 1;
  for (int64_t i = blk.begin; i < blk.end; ++i) s.set(slot_of(i), logits.data() + (i - blk.begin) * V, V, target_of(i));
  finish_sequence_score(s, scored, comm, model_tracker(model));
  return s;
}

SequenceScore score_masked(PerformerModel& model, const std::vector<uint8_t>& r, const ScoreOptions& o,
                           Communicator& comm) {
  const Ranks ranks(comm);
  const int64_t n = static_cast<int64_t>(r.size()), V = model.config().vocab, N = n + 1;
  std::vector<int32_t> tokens(r.begin(), r.end());
  tokens.push_back(Vocab::kEnd);
  const PositionBlock blk = rank_block(N, ranks.rank, ranks.size);
  // Copies per forward: the same on every rank (from the largest block).
  const int64_t largest = (N + ranks.size - 1) / ranks.size;
  const int64_t per_batch =
      std::max<int64_t>(1, std::min<int64_t>(n, o.pll_batch_tokens / std::max<int64_t>(1, largest)));

  SequenceScore s;
  s.reset(n + 1);
  std::vector<char> scored(static_cast<size_t>(n + 1), 0);
  std::fill(scored.begin(), scored.begin() + n, 1);
  const int32_t mask = model.config().tokens.mask;
  std::vector<float> logits;
  for (int64_t first = 0; first < n; first += per_batch) {
    const int64_t B = std::min(per_batch, n - first);
    ModelInput in;
    in.batch = B;
    in.n = blk.size();
    in.offset = blk.begin;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t masked = first + b;
      for (int64_t i = blk.begin; i < blk.end; ++i) {
        in.inputs.push_back(i == masked ? mask : tokens[i]);
        in.targets.push_back(i == masked ? tokens[i] : -1);
      }
    }
    model.forward(in, o.step, &logits);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t masked = first + b;
      if (!blk.holds(masked)) continue;
      s.set(masked, logits.data() + (b * blk.size() + masked - blk.begin) * V, V, tokens[masked]);
    }
  }
  finish_sequence_score(s, scored, comm, model_tracker(model));
  return s;
}

// Inputs of a protein: causal <end>? r_1..r_n (score_causal), masked r_1..r_n <end>.
std::vector<int32_t> score_inputs(const ModelConfig& cfg, const std::vector<uint8_t>& r, const ScoreOptions& o) {
  std::vector<int32_t> t;
  if (cfg.causal() && o.first_residue == FirstResidue::Scored) t.push_back(Vocab::kEnd);
  for (uint8_t x : r) t.push_back(x);
  if (!cfg.causal()) t.push_back(Vocab::kEnd);
  return t;
}

}  // namespace

int64_t packed_score_tokens(const ModelConfig& cfg, int64_t residues, const ScoreOptions& o) {
  return residues + (cfg.causal() ? (o.first_residue == FirstResidue::Scored ? 1 : 0) : 1);
}

std::vector<SequenceScore> score_packed(PerformerModel& model, const std::vector<std::vector<uint8_t>>& proteins,
                                        const ScoreOptions& o, Communicator& comm) {
  const ModelConfig& cfg = model.config();
  const Ranks ranks(comm);
  const int64_t V = cfg.vocab, K = static_cast<int64_t>(proteins.size());
  PackedRow row;
  std::vector<std::vector<int32_t>> inputs;
  int64_t longest = 0;
  for (const std::vector<uint8_t>& r : proteins) {
    PF_REQUIRE(ValueError, !r.empty(), "cannot score an empty sequence");
    inputs.push_back(score_inputs(cfg, r, o));
    row.add(inputs.back());
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.size()));
  }
  // Fewer positions than a split over the ranks needs (packed_row_minimum):
  // a filler sequence after the proteins (K marks it in the row).
  const int64_t filler = packed_row_minimum(cfg, ranks.size) - row.size();
  if (filler > 0) row.add(std::vector<int32_t>(static_cast<size_t>(filler), Vocab::kPad));
  const int64_t N = row.size();
  const PositionBlock blk = rank_block(N, ranks.rank, ranks.size);
  std::vector<SequenceScore> out(static_cast<size_t>(K));
  std::vector<std::vector<char>> scored(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    const size_t n = proteins[static_cast<size_t>(k)].size();
    out[static_cast<size_t>(k)].reset(static_cast<int64_t>(n) + 1);
    scored[static_cast<size_t>(k)].assign(n + 1, 0);
  }
  std::vector<float> logits;
  if (cfg.causal()) {
    const bool lead = o.first_residue == FirstResidue::Scored;
    ModelInput in;
    in.batch = 1;
    in.n = blk.size();
    in.offset = blk.begin;
    for (int64_t x = blk.begin; x < blk.end; ++x) {
      const int64_t k = row.sequence_at(x), i = x - row.start(k);
      in.inputs.push_back(row.tokens[static_cast<size_t>(x)]);
      if (k == K) {  // the filler predicts nothing
        in.targets.push_back(-1);
        continue;
      }
      const std::vector<int32_t>& t = inputs[static_cast<size_t>(k)];
      in.targets.push_back(i + 1 < static_cast<int64_t>(t.size()) ? t[static_cast<size_t>(i + 1)] : Vocab::kEnd);
    }
    in.packed.samples.push_back(row.pieces(blk));
    model.forward(in, o.step, &logits);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t n_in = static_cast<int64_t>(inputs[static_cast<size_t>(k)].size());
      for (int64_t i = 0; i < n_in; ++i) scored[static_cast<size_t>(k)][static_cast<size_t>(lead ? i : i + 1)] = 1;
    }
    for (int64_t x = blk.begin; x < blk.end; ++x) {
      const int64_t k = row.sequence_at(x), i = x - row.start(k);
      if (k == K) continue;
      out[static_cast<size_t>(k)].set(lead ? i : i + 1, logits.data() + (x - blk.begin) * V, V,
                                      in.targets[static_cast<size_t>(x - blk.begin)]);
    }
  } else {
    const int64_t largest = (N + ranks.size - 1) / ranks.size;
    const int64_t per_batch =
        std::max<int64_t>(1, std::min<int64_t>(longest, o.pll_batch_tokens / std::max<int64_t>(1, largest)));
    const int32_t mask = cfg.tokens.mask;
    for (int64_t k = 0; k < K; ++k)
      std::fill(scored[static_cast<size_t>(k)].begin(), scored[static_cast<size_t>(k)].end() - 1, 1);
    for (int64_t first = 0; first < longest; first += per_batch) {
      const int64_t B = std::min(per_batch, longest - first);
      ModelInput in;
      in.batch = B;
      in.n = blk.size();
      in.offset = blk.begin;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t x = blk.begin; x < blk.end; ++x) {
          const int64_t k = row.sequence_at(x), i = x - row.start(k);
          const bool masked =
              k < K && i == first + b && i < static_cast<int64_t>(proteins[static_cast<size_t>(k)].size());
          in.inputs.push_back(masked ? mask : row.tokens[static_cast<size_t>(x)]);
          in.targets.push_back(masked ? row.tokens[static_cast<size_t>(x)] : -1);
        }
        in.packed.samples.push_back(row.pieces(blk));
      }
      model.forward(in, o.step, &logits);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t x = blk.begin; x < blk.end; ++x) {
          const int64_t k = row.sequence_at(x), i = x - row.start(k);
          if (k == K || i != first + b || i >= static_cast<int64_t>(proteins[static_cast<size_t>(k)].size())) continue;
          out[static_cast<size_t>(k)].set(i, logits.data() + (b * blk.size() + x - blk.begin) * V, V,
                                          row.tokens[static_cast<size_t>(x)]);
        }
    }
  }
  for (int64_t k = 0; k < K; ++k)
    finish_sequence_score(out[static_cast<size_t>(k)], scored[static_cast<size_t>(k)], comm, model_tracker(model));
  return out;
}

FirstResidue parse_first_residue(const std::string& text) {
  if (text == "scored") return FirstResidue::Scored;
  if (text == "context") return FirstResidue::Context;
  throw ConfigError("--first-residue must be auto, scored or context, got '" + text + "'");
}

void SequenceScore::reset(int64_t slots) {
  logprob.assign(static_cast<size_t>(slots), 0.0);
  top.assign(static_cast<size_t>(slots), 0.0);
}

void SequenceScore::set(int64_t slot, const float* logits, int64_t V, int32_t target) {
  logprob[static_cast<size_t>(slot)] = log_softmax_at(logits, V, target);
  top[static_cast<size_t>(slot)] = std::max_element(logits, logits + V) - logits == target ? 1.0 : 0.0;
}

double SequenceScore::perplexity() const {
  return scored > 0 ? std::exp(-total / static_cast<double>(scored)) : std::numeric_limits<double>::quiet_NaN();
}

const char* score_measure(const ModelConfig& cfg) { return cfg.causal() ? "log_likelihood" : "pseudo_log_likelihood"; }

SequenceScore score_sequence(PerformerModel& model, const std::vector<uint8_t>& residues, const ScoreOptions& options,
                             Communicator& comm) {
  PF_REQUIRE(ValueError, !residues.empty(), "cannot score an empty sequence");
  PF_REQUIRE(ConfigError, options.pll_batch_tokens >= 1,
             "--pll-batch-tokens must be >= 1, got " << options.pll_batch_tokens);
  // Too short to split over the ranks: packed with a filler (score_packed),
  // which gives the same scores.
  const Ranks ranks(comm);
  if (packed_score_tokens(model.config(), static_cast<int64_t>(residues.size()), options) <
      packed_row_minimum(model.config(), ranks.size))
    return score_packed(model, {residues}, options, comm).front();
  return model.config().causal() ? score_causal(model, residues, options, comm)
                                 : score_masked(model, residues, options, comm);
}

}  // namespace pf
