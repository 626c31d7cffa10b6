// The recurrent form (model/recurrent.h) against the parallel chunked forward
// (PerformerModel::forward) of the same parameters: the logits of every
// position of two sequences agree, for FAVOR+ and ReLU features, with
// model.chunk = 5 (the sequence spans several chunks) and the parallel
// forward split over the launched ranks (sequence parallel, blocks of
// unequal size: 23 positions over 1, 2 or 3 ranks); a segment that starts at
// absolute position 100,000 matches too; memory does not grow with the
// position; masked-LM and softmax models are refused. With a local window
// (model.window, beside FAVOR+ and exp and alone) the recurrent form carries
// the last window - 1 keys and values and matches the parallel form too
// (which takes its halo rows from the neighbouring ranks); a stream saved
// and loaded into another continues as the one it came from.
//
// Tolerance: |recurrent - parallel| <= 2e-6 * max(1, max |logit|). Both forms
// compute in fp32 with different summation orders: the chunked form sums a
// chunk's keys through tril(Pq Pk^T) V' and the earlier chunks through the
// carried state, rescaled to the chunk's largest key log-scale, while the
// recurrent form adds one key at a time to the state, rescaled at every
// step; across ranks the prefix comes from the scan's combine. Each order
// changes a sum by a few ulps (fp32 epsilon is 1.2e-7), and two layers of
// LayerNorm and projections carry that into the logits: the largest
// difference measured is 2.3e-7 of the logit scale (the test prints it), so
// 2e-6 leaves a factor of about 10, while a wrong position or a missing
// state term moves logits by 1e-2 or more.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "model/model.h"
#include "model/recurrent.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/mpi_world.h"

namespace pf {
namespace {

constexpr int64_t kLength = 23;  // not a multiple of the chunk (5) nor of 2 or 3 ranks
constexpr int64_t kBatch = 2;
constexpr double kTolerance = 2e-6;

int32_t residue_token(int64_t sample, int64_t position) {
  const KeyedRandom r(91, 0x7265, static_cast<uint64_t>(sample));
  return 4 + static_cast<int32_t>(r.draw(static_cast<uint64_t>(position)).v[0] % 20);
}

// The block of `rank` out of `ranks`, as the inference tools split a sequence.
void block_of(int64_t n, int rank, int ranks, int64_t* begin, int64_t* end) {
  *begin = n * rank / ranks;
  *end = n * (rank + 1) / ranks;
}

// Logits [kBatch, end - begin, V] of the parallel forward of positions [begin, end) (global offset `offset`).
std::vector<float> parallel_logits(PerformerModel& model, int64_t begin, int64_t end, int64_t offset) {
  ModelInput in;
  in.batch = kBatch;
  in.n = end - begin;
  in.offset = offset + begin;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t p = begin; p < end; ++p) {
      in.inputs.push_back(residue_token(b, p));
      in.targets.push_back(-1);
    }
  std::vector<float> logits;
  model.forward(in, 0, &logits);
  return logits;
}

// Logits [kLength, kBatch, V] of the recurrent form, from position `offset`.
std::vector<float> recurrent_logits(PerformerModel& model, const ExecContext& ctx, int64_t offset) {
  RecurrentPerformer rec(model, ctx, kBatch);
  rec.reset(offset);
  const int64_t V = model.config().vocab;
  std::vector<float> out(static_cast<size_t>(kLength * kBatch * V));
  for (int64_t p = 0; p < kLength; ++p) {
    int32_t tokens[kBatch];
    for (int64_t b = 0; b < kBatch; ++b) tokens[b] = residue_token(b, p);
    rec.step(tokens, out.data() + p * kBatch * V);
  }
  return out;
}

// Largest |recurrent - parallel| over this rank's block, relative to max(1, max |logit|).
double compare(const std::vector<float>& par, const std::vector<float>& rec, int64_t begin, int64_t end, int64_t V,
               const std::string& what) {
  const int64_t n = end - begin;
  double scale = 1, worst = 0;
  for (float v : par) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t v = 0; v < V; ++v) {
        const double a = par[(b * n + i) * V + v];
        const double r = rec[((begin + i) * kBatch + b) * V + v];
        worst = std::max(worst, std::abs(a - r));
        EXPECT_NEAR(r, a, kTolerance * scale) << what << " sample " << b << " position " << begin + i << " token " << v;
      }
  return worst / scale;
}

void check_equivalence(AttentionKind kind, int64_t offset, int64_t window = 0) {
  ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
  cfg.window = window;
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const int P = test::world_size(), r = test::world_rank();
  int64_t begin = 0, end = kLength;
  block_of(kLength, r, P, &begin, &end);
  // The parallel form over the launched ranks; the recurrent form on one.
  std::unique_ptr<Communicator> world = make_mpi_comm(MPI_COMM_WORLD);
  PerformerModel parallel(cfg, res.ctx(), world.get());
  test::perturb_trained_projections(parallel);
  const std::vector<float> par = parallel_logits(parallel, begin, end, offset);
  PerformerModel single(cfg, res.ctx(), nullptr);
  test::perturb_trained_projections(single);
  const std::vector<float> rec = recurrent_logits(single, res.ctx(), offset);
  const std::string what = std::string(attention_kind_name(kind)) + " on " + std::to_string(P) + " rank(s), offset " +
                           std::to_string(offset) + ", window " + std::to_string(window);
  const double worst = compare(par, rec, begin, end, cfg.vocab, what);
  if (r == 0) std::printf("%s: largest |recurrent - parallel| / max(1, max|logit|) = %.3g\n", what.c_str(), worst);
}

TEST(Recurrent, MatchesParallelFavor) { check_equivalence(AttentionKind::Favor, 0); }
TEST(Recurrent, MatchesParallelRelu) { check_equivalence(AttentionKind::Relu, 0); }
TEST(Recurrent, MatchesParallelElu) { check_equivalence(AttentionKind::Elu, 0); }
TEST(Recurrent, MatchesParallelExp) { check_equivalence(AttentionKind::Exp, 0); }
// Positions enter the sinusoidal encoding as absolute positions in both forms.
TEST(Recurrent, MatchesParallelFarPositionsFavor) { check_equivalence(AttentionKind::Favor, 100000); }

// Windows of 1 (the position alone), 4 and 8 (more than a 7-row block of 3
// ranks' parallel form minus one: its halo is a whole neighbouring block).
TEST(Recurrent, MatchesParallelFavorWithWindow) {
  for (int64_t window : {int64_t{1}, int64_t{4}, int64_t{8}}) check_equivalence(AttentionKind::Favor, 0, window);
}
TEST(Recurrent, MatchesParallelExpWithWindow) { check_equivalence(AttentionKind::Exp, 0, 4); }
TEST(Recurrent, MatchesParallelWindowAlone) { check_equivalence(AttentionKind::Softmax, 0, 4); }

// A stream's state (linear state, window rows and their count) saved after
// some tokens and loaded into another stream of another RecurrentPerformer,
// which has run a different number of tokens: the continuation's logits equal
// those of the stream that never stopped (to 1e-6: the other instance's GEMMs
// have two rows, which may round differently; a lost window row or count
// moves logits by 1e-2 or more).
TEST(Recurrent, SavedWindowStreamContinuesElsewhere) {
  ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  cfg.window = 4;
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(cfg, res.ctx(), nullptr);
  const int64_t V = cfg.vocab;
  RecurrentPerformer whole(model, res.ctx(), 1), other(model, res.ctx(), 2);
  std::vector<float> want(static_cast<size_t>(V)), got(static_cast<size_t>(2 * V));
  for (int64_t p = 0; p < 2; ++p) {  // 2 window rows saved; the other stream holds 3
    int32_t t = residue_token(0, p);
    whole.step(&t, want.data());
  }
  const std::vector<std::vector<float>> saved = whole.save_stream(0);
  for (int64_t p = 0; p < 6; ++p) {  // the other streams: a longer run of other tokens
    int32_t t[2] = {residue_token(1, p), residue_token(1, p + 1)};
    other.step(t, got.data());
  }
  other.load_stream(1, saved);
  other.set_position(whole.position());
  for (int64_t p = 2; p < 10; ++p) {
    int32_t t = residue_token(0, p), two[2] = {residue_token(1, p), residue_token(0, p)};
    whole.step(&t, want.data());
    other.step(two, got.data());
    for (int64_t v = 0; v < V; ++v)
      ASSERT_NEAR(got[static_cast<size_t>(V + v)], want[static_cast<size_t>(v)], 1e-6) << "position " << p;
  }
  // The saved state holds the 2 valid rows, not the window's 4. A count of
  // window rows beyond the window's w - 1 = 3 is refused.
  const size_t count_at = saved[0].size() - 1 - 2 * static_cast<size_t>(cfg.heads * 2 * cfg.head_dim());
  EXPECT_EQ(saved[0][count_at], 2.f);
  std::vector<std::vector<float>> bad = saved;
  bad[0][count_at] = 7.f;
  EXPECT_THROW(other.load_stream(0, bad), ValueError);
  bad[0][count_at] = 3.f;  // a count in range that the rows do not match
  EXPECT_THROW(other.load_stream(0, bad), ValueError);
}

// A window far longer than any stream (model.window = 2^40 - 1): the rows
// held follow the tokens run (at most twice the most valid rows plus one,
// doubling), and the logits equal those of a window of exactly the tokens
// run, which sees the same keys. A window of 4 stops growing at 4 rows.
TEST(Recurrent, WindowMemoryFollowsTheTokens) {
  ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  const int64_t tokens = 100, D = cfg.head_dim(), lin = cfg.heads * (1 + cfg.features * (D + 1));
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  cfg.window = (int64_t{1} << 40) - 1;
  PerformerModel huge_model(cfg, res.ctx(), nullptr);
  cfg.window = tokens;
  PerformerModel exact_model(cfg, res.ctx(), nullptr);
  exact_model.params().copy_from(huge_model.params());
  RecurrentPerformer huge(huge_model, res.ctx(), 1), exact(exact_model, res.ctx(), 1);
  const int64_t start = huge.state_bytes();
  EXPECT_EQ(start, cfg.layers * (lin + 2 * cfg.heads * D) * 4);  // one row: the current position's
  std::vector<float> a(static_cast<size_t>(cfg.vocab)), b(a.size());
  for (int64_t p = 0; p < tokens; ++p) {
    int32_t t = residue_token(0, p);
    huge.step(&t, a.data());
    exact.step(&t, b.data());
    for (size_t v = 0; v < a.size(); ++v) ASSERT_EQ(a[v], b[v]) << "position " << p;
    const int64_t rows = (huge.state_bytes() / (4 * cfg.layers) - lin) / (2 * cfg.heads * D);
    ASSERT_GE(rows, std::min<int64_t>(p + 2, tokens));
    ASSERT_LE(rows, 2 * (p + 2));
  }
  cfg.window = 4;
  PerformerModel small_model(cfg, res.ctx(), nullptr);
  RecurrentPerformer small(small_model, res.ctx(), 1);
  for (int64_t p = 0; p < 50; ++p) {
    int32_t t = residue_token(0, p);
    small.step(&t, a.data());
  }
  EXPECT_EQ(small.state_bytes(), cfg.layers * (lin + 2 * cfg.heads * 4 * D) * 4);
}

TEST(Recurrent, MemoryDoesNotGrowWithPosition) {
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(cfg, res.ctx(), nullptr);
  RecurrentPerformer rec(model, res.ctx(), 1);
  const int64_t D = cfg.head_dim();
  EXPECT_EQ(rec.state_bytes(), cfg.layers * cfg.heads * (1 + cfg.features * (D + 1)) * 4);
  std::vector<float> logits(static_cast<size_t>(cfg.vocab));
  int32_t token = 5;
  rec.step(&token, logits.data());
  const int64_t after_one = tracker.stats().current_bytes;
  for (int i = 0; i < 3000; ++i) rec.step(&token, logits.data());
  EXPECT_EQ(tracker.stats().current_bytes, after_one);
  EXPECT_EQ(rec.position(), 3001);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
}

TEST(Recurrent, RefusesModelsWithoutARecurrentForm) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  {
    PerformerModel mlm(test::tiny_config(AttentionKind::Favor, Objective::MaskedLM), res.ctx(), nullptr);
    EXPECT_THROW(RecurrentPerformer(mlm, res.ctx(), 1), ConfigError);
  }
  {
    PerformerModel softmax(test::tiny_config(AttentionKind::Softmax, Objective::CausalLM), res.ctx(), nullptr);
    EXPECT_THROW(RecurrentPerformer(softmax, res.ctx(), 1), ConfigError);
  }
}

}  // namespace
}  // namespace pf
