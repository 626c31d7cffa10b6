// Family batches (model/packed_layout.h, data.mode = "family"): the members of
// one family back to back, each joining the state segment of the one before
// it, several families per sample. On the launched world as one sequence
// group (sp = 1..4) and as dp x sp = 2 x 2:
//  - a batch of several families gives the loss sum, the logits of every row
//    and the gradients of each family run alone as a sample of its own on one
//    rank, summed (relative 1e-6 for losses and logits, 1e-5 L2 for
//    gradients), causal and masked, FAVOR+, ReLU, elu and exp (softmax on one
//    rank);
//  - a family alone equals, with no positional encoding, its members
//    concatenated as one plain sequence (causal: the targets run across
//    members, and the state is carried across them);
//  - leakage inside a family is the point, between families it is none:
//    changing every residue of one member leaves every other family's logits
//    bit for bit unchanged, changes the later members' logits, and (causal)
//    leaves the earlier members' logits bit for bit unchanged;
//  - three AdamW steps at dp x sp give the losses, first gradients and
//    parameters of sp = 1.
// The 4 samples of 24 positions (slices of 24, 12, 8, 6 at sp = 1..4):
//   sample 0: family {6, 2, 5} then family {4, 7}: member boundaries at the
//             rank edges 6 (sp = 4) and 8 (sp = 3), a family boundary at 13
//   sample 1: family {12, 5}, then 7 of padding: a member boundary at the
//             rank edge 12 (sp = 2, 4)
//   sample 2: one family of 8 members of 3 tokens over every rank
//   sample 3: families {3}, {10, 9}, {2}: one-member families beside one of two
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/trainer.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/random.h"
#include "tests/model/layout_fixtures.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/mpi_world.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

using test::Pass;
using test::run_model;
using test::what;
using test::world_rank;
using test::world_size;

constexpr int64_t kLength = 24;
constexpr int32_t kEnd = 1;

struct Member {
  uint64_t key = 0;
  std::vector<int32_t> tokens;  // residues then <end>
};
using Family = std::vector<Member>;
using Sample = std::vector<Family>;  // back to back from position 0, then padding

std::vector<Sample> make_samples(uint64_t seed) {
  const std::vector<std::vector<std::vector<int64_t>>> lengths = {
      {{6, 2, 5}, {4, 7}}, {{12, 5}}, {{3, 3, 3, 3, 3, 3, 3, 3}}, {{3}, {10, 9}, {2}}};
  std::vector<Sample> out;
  uint64_t key = 100;
  for (const auto& sample : lengths) {
    Sample s;
    for (const auto& family : sample) {
      Family f;
      for (int64_t len : family) {
        Member m;
        m.key = key++;
        const KeyedRandom r(seed, 0x9e37, m.key);
        for (int64_t i = 0; i + 1 < len; ++i) m.tokens.push_back(4 + static_cast<int32_t>(r.draw(i).v[0] % 25));
        m.tokens.push_back(kEnd);
        f.push_back(m);
      }
      s.push_back(f);
    }
    out.push_back(s);
  }
  return out;
}

int64_t tokens_of(const Family& f) {
  int64_t t = 0;
  for (const Member& m : f) t += static_cast<int64_t>(m.tokens.size());
  return t;
}

// Rows [begin, end) of samples [first, first + count) of `samples`, each of
// `length` positions, as the loader hands them: one piece per member, every
// member after a family's first joining the one before it; the lookahead is
// the next token of the member that holds row end - 1, the first token of
// the next member of its family where it ends at `end`, else padding.
TokenBatch family_slice(const std::vector<Sample>& samples, int64_t first, int64_t count, int64_t length, int64_t begin,
                        int64_t end) {
  TokenBatch b;
  b.batch = count;
  b.n = end - begin;
  b.offset = begin;
  for (int64_t s = first; s < first + count; ++s) {
    std::vector<int32_t> row(static_cast<size_t>(length), 0);
    std::vector<SequencePiece> pieces;
    int32_t lookahead = 0;
    int64_t x = 0;
    for (const Family& f : samples[static_cast<size_t>(s)])
      for (size_t k = 0; k < f.size(); ++k) {
        const Member& m = f[k];
        const int64_t len = static_cast<int64_t>(m.tokens.size());
        for (int64_t i = 0; i < len; ++i) row[static_cast<size_t>(x + i)] = m.tokens[static_cast<size_t>(i)];
        const int64_t lo = std::max(x, begin), hi = std::min(x + len, end);
        if (lo < hi) pieces.push_back({lo - begin, lo - x, m.key, k > 0 && lo == x});
        if (end > x && end < x + len) lookahead = m.tokens[static_cast<size_t>(end - x)];
        if (end == x + len && k + 1 < f.size()) lookahead = f[k + 1].tokens[0];
        x += len;
      }
    if (std::max(x, begin) < end) pieces.push_back({std::max(x, begin) - begin, std::max(x, begin) - x, ~uint64_t{0}});
    for (int64_t i = begin; i < end; ++i) b.tokens.push_back(row[static_cast<size_t>(i)]);
    b.lookahead.push_back(end == length ? -1 : lookahead);
    b.sample_ids.push_back(static_cast<uint64_t>(s));
    b.packed.samples.push_back(pieces);
  }
  return b;
}

// One family as a sample of its own, on one rank.
TokenBatch family_alone(const Family& f) {
  const std::vector<Sample> one = {{f}};
  return family_slice(one, 0, 1, tokens_of(f), 0, tokens_of(f));
}

// The world as one sequence group: the family slices against every family alone.
void check_against_each_family(const ModelConfig& cfg) {
  const int P = world_size(), r = world_rank();
  MemoryTracker tracker(Device::cpu());
  const std::vector<Sample> samples = make_samples(3);
  const int64_t B = static_cast<int64_t>(samples.size()), n = kLength / P, V = cfg.vocab;
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  const Pass got = run_model(cfg, world.get(), family_slice(samples, 0, B, kLength, r * n, (r + 1) * n), tracker);
  double loss = got.loss;
  std::vector<float> grads = got.grads;
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  test::AloneSum want;
  for (int64_t s = 0; s < B; ++s) {
    int64_t x = 0;
    for (const Family& f : samples[static_cast<size_t>(s)]) {
      want.add(run_model(cfg, nullptr, family_alone(f), tracker), got, s, x, tokens_of(f), r, n, V);
      x += tokens_of(f);
    }
  }
  want.expect_matches(loss, grads, what(cfg, P) + " rank " + std::to_string(r));
}

TEST(FamilyModel, EqualsEachFamilyAlone) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Elu, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      SCOPED_TRACE(what(test::tiny_config(kind, obj), world_size()));
      check_against_each_family(test::tiny_config(kind, obj));
    }
}

TEST(FamilyModel, SoftmaxEqualsEachFamilyAlone) {
  if (world_size() != 1) GTEST_SKIP() << "exact softmax attention runs on one rank";
  check_against_each_family(test::tiny_config(AttentionKind::Softmax, Objective::CausalLM));
  check_against_each_family(test::tiny_config(AttentionKind::Softmax, Objective::MaskedLM));
}

// A local window beside FAVOR+ (distinct gates): the window runs across the
// members of a family, as softmax does, and never into another family; on
// several ranks with halo rows from the neighbours.
TEST(FamilyModel, WindowEqualsEachFamilyAlone) {
  for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
    ModelConfig cfg = test::tiny_config(AttentionKind::Favor, obj);
    cfg.window = 5;
    SCOPED_TRACE(what(cfg, world_size()));
    check_against_each_family(cfg);
  }
}

// Without positions, a family alone is its members' concatenation run as one
// plain sequence: the same state carried across members, the same targets
// (the <end> of a member predicts the next member's first residue).
TEST(FamilyModel, FamilyAloneEqualsItsMembersConcatenated) {
  if (world_rank() != 0) return;
  const std::vector<Sample> samples = make_samples(5);
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Exp, AttentionKind::Softmax}) {
    ModelConfig cfg = test::tiny_config(kind, Objective::CausalLM);
    cfg.positional = PositionalEncoding::None;
    MemoryTracker tracker(Device::cpu());
    for (const Family& f : {samples[0][0], samples[2][0]}) {
      TokenBatch plain;
      plain.batch = 1;
      for (const Member& m : f) plain.tokens.insert(plain.tokens.end(), m.tokens.begin(), m.tokens.end());
      plain.n = static_cast<int64_t>(plain.tokens.size());
      plain.lookahead = {-1};
      plain.sample_ids = {0};
      const Pass want = run_model(cfg, nullptr, plain, tracker);
      const Pass got = run_model(cfg, nullptr, family_alone(f), tracker);
      EXPECT_EQ(make_model_input(cfg, plain, 0).targets, make_model_input(cfg, family_alone(f), 0).targets);
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::abs(want.loss)) << attention_kind_name(kind);
      EXPECT_LT(test::rel_l2(got.logits, want.logits), 1e-6) << attention_kind_name(kind);
      EXPECT_LT(test::rel_l2(got.grads, want.grads), 1e-5) << attention_kind_name(kind);
    }
  }
}

// Every residue of member 1 of sample 0's first family (rows 6-7: the 2-token
// member, on its own rank at sp = 4) changed.
void check_leakage(const ModelConfig& cfg) {
  const int P = world_size(), r = world_rank();
  MemoryTracker tracker(Device::cpu());
  std::vector<Sample> samples = make_samples(3);
  const int64_t B = static_cast<int64_t>(samples.size()), n = kLength / P, V = cfg.vocab;
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  const Pass before = run_model(cfg, world.get(), family_slice(samples, 0, B, kLength, r * n, (r + 1) * n), tracker);
  std::vector<int32_t>& changed = samples[0][0][1].tokens;
  for (size_t i = 0; i + 1 < changed.size(); ++i) changed[i] = 4 + (changed[i] - 4 + 7) % 25;
  const Pass after = run_model(cfg, world.get(), family_slice(samples, 0, B, kLength, r * n, (r + 1) * n), tracker);
  // Rows of sample 0: member 0 [0, 6), member 1 [6, 8), member 2 [8, 13), the other family [13, 24).
  int64_t differing[4] = {0, 0, 0, 0};  // other families, earlier member, the member itself, later member
  for (int64_t s = 0; s < B; ++s)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = r * n + i;
      const int kind = s != 0 || pos >= 13 ? 0 : pos < 6 ? 1 : pos < 8 ? 2 : 3;
      for (int64_t v = 0; v < V; ++v) {
        const size_t k = static_cast<size_t>((s * n + i) * V + v);
        differing[kind] += before.logits[k] != after.logits[k];
      }
    }
  EXPECT_EQ(differing[0], 0) << what(cfg, P) << " rank " << r << ": another family's logits changed";
  if (cfg.objective == Objective::CausalLM) {
    EXPECT_EQ(differing[1], 0) << what(cfg, P) << " rank " << r << ": an earlier member's logits changed";
  }
  int64_t anywhere[4];
  MPI_Allreduce(differing, anywhere, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(anywhere[3], 0) << what(cfg, P) << ": the later member did not read the changed one";
  if (cfg.objective == Objective::MaskedLM) {
    EXPECT_GT(anywhere[1], 0) << what(cfg, P) << ": bidirectional, the earlier member did not read the changed one";
  }
}

TEST(FamilyModel, LeakageInsideAFamilyOnly) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu, AttentionKind::Exp})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) check_leakage(test::tiny_config(kind, obj));
  if (world_size() == 1) {
    check_leakage(test::tiny_config(AttentionKind::Softmax, Objective::CausalLM));
    check_leakage(test::tiny_config(AttentionKind::Softmax, Objective::MaskedLM));
  }
}

test::TrainResult train(const ModelConfig& cfg, ParallelGrid& grid, MemoryTracker& tracker) {
  const std::vector<Sample> samples = make_samples(3);
  const int64_t per_dp = static_cast<int64_t>(samples.size()) / grid.dp_size(), n = kLength / grid.sp_size();
  return test::train_three_steps(
      cfg, grid, tracker,
      family_slice(samples, grid.dp_rank() * per_dp, per_dp, kLength, grid.sp_rank() * n, (grid.sp_rank() + 1) * n));
}

TEST(FamilyModel, ThreeAdamWStepsMatchOneRank) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      const ModelConfig cfg = test::tiny_config(kind, obj);
      MemoryTracker tracker(Device::cpu());
      ParallelGrid local(make_local_comm(), 1);
      const test::TrainResult want = train(cfg, local, tracker);
      for (int sp : {world_size(), world_size() == 4 ? 2 : 0}) {
        if (sp == 0) continue;
        ParallelGrid grid(make_mpi_comm(MPI_COMM_WORLD), sp);
        test::expect_same_training(train(cfg, grid, tracker), want,
                                   what(cfg, sp) + " dp=" + std::to_string(grid.dp_size()));
      }
    }
}

}  // namespace
}  // namespace pf
