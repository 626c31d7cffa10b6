// Scoring with a context of homologs (launch/infer/context_scoring.h), on the
// launched ranks (1 and 2; 2 also with asynchronous jittered CPU streams, the
// scores summed into rank 0 over the communicator's stream):
//  - the cached state (context run once through the recurrent form, every
//    query started from its state) gives the log-probabilities of one pass
//    over context + query, for FAVOR+, ReLU, elu + 1 and exp, with the one
//    pass split over the ranks and the cached queries dealt to them; each
//    one-pass score equals a single rank's;
//  - the one pass is the family layout of training: its log-probabilities
//    are those of the model's forward on the family sample [context, query]
//    with targets across members (built independently here);
//  - the context runs through the model once for any number of queries when
//    cached, and once per query in one pass (counted, not timed);
//  - exact softmax scores in one pass; a masked-LM model and an empty context
//    are refused.
// Tolerance 2e-6 of max(1, |log p|) per term (the recurrent and chunked forms
// sum in different orders: tests/model/test_recurrent.cc).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "data/vocab.h"
#include "launch/infer/context_scoring.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/mpi_world.h"
#include "tests/support/random_protein.h"

namespace pf {
namespace {

std::vector<uint8_t> protein(uint64_t key, int64_t length) { return test::random_protein(17, 0x51c0, key, length); }

const std::vector<std::vector<uint8_t>> kContext = {protein(1, 9), protein(2, 4), protein(3, 12)};
const std::vector<std::vector<uint8_t>> kQueries = {protein(10, 7), protein(11, 1), protein(12, 15), protein(13, 6),
                                                    protein(14, 11)};

void expect_close(const SequenceScore& got, const SequenceScore& want, const std::string& what) {
  ASSERT_EQ(got.logprob.size(), want.logprob.size()) << what;
  for (size_t i = 0; i < want.logprob.size(); ++i) {
    if (std::isnan(want.logprob[i])) {  // not scored (a masked model's <end>)
      EXPECT_TRUE(std::isnan(got.logprob[i])) << what << " term " << i;
      continue;
    }
    EXPECT_NEAR(got.logprob[i], want.logprob[i], 2e-6 * std::max(1.0, std::abs(want.logprob[i])))
        << what << " term " << i;
  }
  ASSERT_EQ(got.top.size(), want.logprob.size()) << what;
  for (size_t i = 0; i < want.top.size(); ++i) {  // NaN in want: two logits too close to rank across paths
    if (std::isnan(want.top[i])) continue;
    EXPECT_EQ(got.top[i], want.top[i]) << what << " top flag of term " << i;
  }
  EXPECT_EQ(got.scored, want.scored) << what;
}

// The one-pass numbers from the model's forward on the family sample, on this rank alone.
SequenceScore reference(PerformerModel& model, const std::vector<uint8_t>& query) {
  TokenBatch b;
  b.batch = 1;
  std::vector<SequencePiece> pieces;
  std::vector<const std::vector<uint8_t>*> members;
  for (const auto& c : kContext) members.push_back(&c);
  members.push_back(&query);
  for (size_t k = 0; k < members.size(); ++k) {
    pieces.push_back({static_cast<int64_t>(b.tokens.size()), 0, k, k > 0});
    b.tokens.insert(b.tokens.end(), members[k]->begin(), members[k]->end());
    if (k + 1 < members.size()) b.tokens.push_back(Vocab::kEnd);
  }
  b.n = static_cast<int64_t>(b.tokens.size());
  b.lookahead = {Vocab::kEnd};
  b.sample_ids = {0};
  b.packed.samples = {pieces};
  const ModelInput in = make_model_input(model.config(), b, 0);
  std::vector<float> logits;
  model.forward(in, 0, &logits);
  const int64_t V = model.config().vocab, qs = pieces.back().begin;
  SequenceScore s;
  for (int64_t i = qs - 1; i < b.n; ++i) {
    const float* row = logits.data() + i * V;
    const int32_t y = in.targets[static_cast<size_t>(i)];
    s.logprob.push_back(log_softmax_at(row, V, y));
    s.total += s.logprob.back();
    std::vector<float> sorted(row, row + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    s.top.push_back(sorted[0] - sorted[1] < 1e-4f ? std::nan("") : row[y] == sorted[0] ? 1.0 : 0.0);
  }
  s.scored = static_cast<int64_t>(s.logprob.size());
  return s;
}

// Every linear kind, and a local window of 5 beside FAVOR+ and alone (the
// cached state then holds the window's last keys and values).
TEST(ContextScoring, CachedStateEqualsOnePassAndTheFamilyForward) {
  const int r = test::world_rank();
  const std::vector<std::pair<AttentionKind, int64_t>> kinds = {{AttentionKind::Favor, 0}, {AttentionKind::Relu, 0},
                                                                {AttentionKind::Elu, 0},   {AttentionKind::Exp, 0},
                                                                {AttentionKind::Favor, 5}, {AttentionKind::Softmax, 5}};
  for (const auto& [kind, window] : kinds) {
    ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
    cfg.window = window;
    MemoryTracker tracker(Device::cpu());
    ExecResources res(Device::cpu(), tracker);
    std::unique_ptr<Communicator> world = make_mpi_comm(MPI_COMM_WORLD);
    PerformerModel model(cfg, res.ctx(), world.get());
    test::perturb_trained_projections(model);
    PerformerModel alone(cfg, res.ctx(), nullptr);
    test::perturb_trained_projections(alone);
    ScoreOptions o;
    ContextScorer cached(model, res.ctx(), kContext, o, *world, true, 2);
    ContextScorer one_pass(model, res.ctx(), kContext, o, *world, false);
    ASSERT_TRUE(cached.cached());
    ASSERT_FALSE(one_pass.cached());
    const std::vector<SequenceScore> a = cached.score(kQueries), b = one_pass.score(kQueries);
    EXPECT_EQ(cached.context_tokens_run(), cached.context_tokens()) << "the context ran more than once";
    EXPECT_EQ(one_pass.context_tokens_run(), 5 * one_pass.context_tokens());
    EXPECT_EQ(cached.context_tokens(), 9 + 4 + 12 + 3);
    if (r != 0) continue;
    for (size_t q = 0; q < kQueries.size(); ++q) {
      const std::string what =
          std::string(attention_kind_name(kind)) + " window " + std::to_string(window) + " query " + std::to_string(q);
      expect_close(a[q], b[q], what + " cached vs one pass");
      expect_close(b[q], reference(alone, kQueries[q]), what + " one pass vs the family forward");
      EXPECT_EQ(b[q].scored, static_cast<int64_t>(kQueries[q].size()) + 1);
    }
  }
}

// A window longer than a rank's rows (window 40: each rank needs 39 rows,
// so a row of fewer than 2 x 39 positions cannot split over 2 ranks as it
// is): the scoring paths pad the row with a filler sequence of its own, and
// every protein, short or long, alone, packed, or as the query of a context
// (one pass and cached: queries dealt whole to the ranks), scores as on one
// rank. Causal and masked.
TEST(ContextScoring, AWindowLongerThanARanksRowsScoresAsOnOneRank) {
  const int r = test::world_rank();
  const std::vector<std::vector<uint8_t>> proteins = {protein(20, 1), protein(21, 9), protein(22, 37), protein(23, 80),
                                                      protein(24, 130)};
  for (const Objective objective : {Objective::CausalLM, Objective::MaskedLM})
    for (const AttentionKind kind : {AttentionKind::Favor, AttentionKind::Softmax}) {
      ModelConfig cfg = test::tiny_config(kind, objective);
      cfg.window = 40;
      MemoryTracker tracker(Device::cpu());
      ExecResources res(Device::cpu(), tracker);
      std::unique_ptr<Communicator> world = make_mpi_comm(MPI_COMM_WORLD);
      std::unique_ptr<Communicator> self = make_local_comm();
      PerformerModel model(cfg, res.ctx(), world.get());
      PerformerModel alone(cfg, res.ctx(), nullptr);
      ScoreOptions o;
      o.pll_batch_tokens = 400;
      const std::string name = std::string(objective == Objective::CausalLM ? "clm " : "mlm ") +
                               attention_kind_name(kind) + " window 40 on " + std::to_string(test::world_size()) +
                               " rank(s)";
      std::vector<SequenceScore> one;
      for (const std::vector<uint8_t>& p : proteins) one.push_back(score_sequence(alone, p, o, *self));
      const std::vector<SequenceScore> packed = score_packed(model, {proteins[0], proteins[1]}, o, *world);
      for (size_t k = 0; k < proteins.size(); ++k) {
        const SequenceScore got = score_sequence(model, proteins[k], o, *world);
        if (r == 0) expect_close(got, one[k], name + ", protein of " + std::to_string(proteins[k].size()));
      }
      if (r == 0)
        for (size_t k = 0; k < packed.size(); ++k)
          expect_close(packed[k], one[k], name + ", packed " + std::to_string(k));
      if (objective != Objective::CausalLM) continue;
      ContextScorer cached(model, res.ctx(), kContext, o, *world, true, 2);
      ContextScorer one_pass(model, res.ctx(), kContext, o, *world, false);
      const std::vector<SequenceScore> a = cached.score(kQueries), b = one_pass.score(kQueries);
      if (r != 0) continue;
      // Against this rank alone (cached against one pass: the test above).
      ContextScorer cached_alone(alone, res.ctx(), kContext, o, *self, true, 2);
      const std::vector<SequenceScore> want_cached = cached_alone.score(kQueries);
      for (size_t q = 0; q < kQueries.size(); ++q) {
        const SequenceScore want = score_in_context_one_pass(alone, kContext, kQueries[q], o, *self);
        expect_close(b[q], want, name + ", one pass, query " + std::to_string(q));
        expect_close(a[q], want_cached[q], name + ", cached, query " + std::to_string(q));
      }
    }
}

TEST(ContextScoring, OnePassSoftmaxAndRefusals) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  ScoreOptions o;
  std::unique_ptr<Communicator> self = make_local_comm();
  if (test::world_size() == 1) {
    const ModelConfig cfg = test::tiny_config(AttentionKind::Softmax, Objective::CausalLM);
    PerformerModel model(cfg, res.ctx(), nullptr);
    ContextScorer s(model, res.ctx(), kContext, o, *self, true);
    EXPECT_FALSE(s.cached()) << "softmax has no fixed-size state to cache";
    const std::vector<SequenceScore> got = s.score({kQueries[0], kQueries[2]});
    expect_close(got[0], reference(model, kQueries[0]), "softmax query 0");
    expect_close(got[1], reference(model, kQueries[2]), "softmax query 2");
  }
  const ModelConfig masked = test::tiny_config(AttentionKind::Favor, Objective::MaskedLM);
  PerformerModel mlm(masked, res.ctx(), nullptr);
  EXPECT_THROW(ContextScorer(mlm, res.ctx(), kContext, o, *self), ConfigError);
  const ModelConfig causal = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  PerformerModel clm(causal, res.ctx(), nullptr);
  EXPECT_THROW(ContextScorer(clm, res.ctx(), {}, o, *self), ConfigError);
  EXPECT_THROW(ContextScorer(clm, res.ctx(), {protein(1, 3), {}}, o, *self), ConfigError);
}

}  // namespace
}  // namespace pf
