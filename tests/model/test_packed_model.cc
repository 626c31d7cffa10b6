// Packed batches (model/packed_layout.h) against each protein alone, on the
// launched world as one sequence group (sp = 1..4) and as dp x sp = 2 x 2:
//  - the loss sum, the logits of every protein's rows and the gradients of a
//    packed batch equal those of running each protein alone as a batch of
//    its own and summing (relative 1e-6 for losses and logits, 1e-5 L2 for
//    gradients), causal and masked, FAVOR+ and ReLU (softmax on one rank);
//  - three AdamW steps of the packed batch at dp x sp give the losses, first
//    gradients and parameters of the same batch at sp = 1;
//  - no leakage: changing every residue of one protein leaves the logits of
//    every other protein of the batch bit for bit unchanged.
// Three random packings (proteins of 2-17 tokens) are checked too. The
// layout of the 4 samples of 24 positions places boundaries on purpose
// (slices of 24, 12, 8, 6 positions at sp = 1..4):
//   sample 0: proteins of 6, 2, 12, 4 tokens: a boundary at the rank edge 6
//             (sp = 4) and 8 (sp = 3), a 1-residue protein, a protein over
//             three ranks whose middle rank holds nothing else (sp = 4)
//   sample 1: 12 and 5 tokens, then 7 of padding (edge 12 at sp = 2 and 4)
//   sample 2: the window of 24 tokens of a longer protein (a crop: its last
//             position predicts the protein's next residue)
//   sample 3: proteins of 3, 19 and 2 tokens
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>
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

struct Protein {
  uint64_t key = 0;
  std::vector<int32_t> tokens;  // residues then <end>, or a crop's window
  int32_t next = -1;            // crop: the protein's token after the window
};

struct PackedSample {
  std::vector<Protein> proteins;  // back to back from position 0, then padding
};

Protein make_protein(uint64_t key, int64_t length, bool crop, uint64_t seed) {
  Protein p;
  p.key = key;
  const KeyedRandom r(seed, 0x9e37, key);
  for (int64_t i = 0; i < length + (crop ? 1 : 0); ++i)
    p.tokens.push_back(4 + static_cast<int32_t>(r.draw(i).v[0] % 25));
  if (crop) {
    p.next = p.tokens.back();
    p.tokens.pop_back();
  } else {
    p.tokens.back() = kEnd;
  }
  return p;
}

// Random packings: 4 samples of proteins of 2-17 tokens filled in turn, the
// last one of a sample cut to the room left, keyed by `layout_seed`.
std::vector<std::vector<int64_t>> random_lengths(uint64_t layout_seed) {
  std::vector<std::vector<int64_t>> out(4);
  const KeyedRandom r(layout_seed, 0x1a7, 0);
  uint64_t k = 0;
  for (auto& sample : out) {
    int64_t used = 0;
    while (used < kLength) {
      const int64_t len = std::min<int64_t>(2 + r.draw(k++).v[0] % 16, kLength - used);
      sample.push_back(len);
      used += len;
    }
  }
  return out;
}

std::vector<PackedSample> make_samples(uint64_t seed, uint64_t layout_seed = 0) {
  const std::vector<std::vector<int64_t>> lengths =
      layout_seed == 0 ? std::vector<std::vector<int64_t>>{{6, 2, 12, 4}, {12, 5}, {24}, {3, 19, 2}}
                       : random_lengths(layout_seed);
  std::vector<PackedSample> out;
  uint64_t key = 100;
  for (size_t s = 0; s < lengths.size(); ++s) {
    PackedSample ps;
    for (int64_t len : lengths[s]) ps.proteins.push_back(make_protein(key++, len, layout_seed == 0 && s == 2, seed));
    out.push_back(ps);
  }
  return out;
}

// Samples [first, first + count), positions [begin, end), as the loader hands them.
TokenBatch packed_slice(const std::vector<PackedSample>& samples, int64_t first, int64_t count, int64_t begin,
                        int64_t end) {
  TokenBatch b;
  b.batch = count;
  b.n = end - begin;
  b.offset = begin;
  for (int64_t s = first; s < first + count; ++s) {
    std::vector<int32_t> row(static_cast<size_t>(kLength), 0);
    std::vector<SequencePiece> pieces;
    int32_t lookahead = -1;
    int64_t x = 0;
    auto add_run = [&](int64_t from, int64_t to, uint64_t key) {
      const int64_t lo = std::max(from, begin), hi = std::min(to, end);
      if (lo < hi) pieces.push_back({lo - begin, lo - from, key});
    };
    for (const Protein& p : samples[static_cast<size_t>(s)].proteins) {
      const int64_t len = static_cast<int64_t>(p.tokens.size());
      for (int64_t i = 0; i < len; ++i) row[static_cast<size_t>(x + i)] = p.tokens[static_cast<size_t>(i)];
      add_run(x, x + len, p.key);
      if (end > x && end < x + len) lookahead = p.tokens[static_cast<size_t>(end - x)];
      if (end == x + len) lookahead = p.next >= 0 ? p.next : 0;
      x += len;
    }
    if (x < kLength) add_run(x, kLength, ~uint64_t{0});
    if (end > x && end < kLength) lookahead = 0;
    for (int64_t i = begin; i < end; ++i) b.tokens.push_back(row[static_cast<size_t>(i)]);
    b.lookahead.push_back(end == kLength && lookahead == 0 ? -1 : lookahead);
    b.sample_ids.push_back(static_cast<uint64_t>(s));
    b.packed.samples.push_back(pieces);
  }
  return b;
}

TokenBatch alone(const Protein& p) {
  TokenBatch b;
  b.batch = 1;
  b.n = static_cast<int64_t>(p.tokens.size());
  b.tokens = p.tokens;
  b.lookahead = {p.next};
  b.sample_ids = {p.key};
  return b;
}

// The world as one sequence group: the packed slices against every protein alone.
void check_against_alone(const ModelConfig& cfg, uint64_t layout_seed = 0) {
  const int P = world_size(), r = world_rank();
  MemoryTracker tracker(Device::cpu());
  const std::vector<PackedSample> samples = make_samples(3, layout_seed);
  const int64_t B = static_cast<int64_t>(samples.size()), n = kLength / P;
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  const TokenBatch slice = packed_slice(samples, 0, B, r * n, (r + 1) * n);
  const Pass packed = run_model(cfg, world.get(), slice, tracker);
  double loss = packed.loss;
  std::vector<float> grads = packed.grads;
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

  test::AloneSum want;
  for (int64_t s = 0; s < B; ++s) {
    int64_t x = 0;
    for (const Protein& p : samples[static_cast<size_t>(s)].proteins) {
      const int64_t len = static_cast<int64_t>(p.tokens.size());
      want.add(run_model(cfg, nullptr, alone(p), tracker), packed, s, x, len, r, n, cfg.vocab);
      x += len;
    }
  }
  want.expect_matches(loss, grads, what(cfg, P) + " rank " + std::to_string(r));
}

TEST(PackedModel, FavorCausalEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Favor, Objective::CausalLM));
}
TEST(PackedModel, FavorMaskedEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Favor, Objective::MaskedLM));
}
TEST(PackedModel, ReluCausalEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Relu, Objective::CausalLM));
}
TEST(PackedModel, ReluMaskedEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Relu, Objective::MaskedLM));
}
TEST(PackedModel, EluCausalEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Elu, Objective::CausalLM));
}
TEST(PackedModel, EluMaskedEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Elu, Objective::MaskedLM));
}
TEST(PackedModel, ExpCausalEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Exp, Objective::CausalLM));
}
TEST(PackedModel, ExpMaskedEqualsEachProteinAlone) {
  check_against_alone(test::tiny_config(AttentionKind::Exp, Objective::MaskedLM));
}
TEST(PackedModel, RandomPackingsEqualEachProteinAlone) {
  for (uint64_t layout : {1, 2, 3})
    for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu})
      for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
        SCOPED_TRACE(testing::Message() << "random packing " << layout);
        check_against_alone(test::tiny_config(kind, obj), layout);
      }
}

TEST(PackedModel, SoftmaxEqualsEachProteinAlone) {
  if (world_size() != 1) GTEST_SKIP() << "exact softmax attention runs on one rank";
  check_against_alone(test::tiny_config(AttentionKind::Softmax, Objective::CausalLM));
  check_against_alone(test::tiny_config(AttentionKind::Softmax, Objective::MaskedLM));
}

// A local window (alone, and beside FAVOR+ with distinct gates) stays inside
// each protein: the window's softmax runs per piece like softmax, and across
// ranks a protein cut by a rank edge takes its halo rows from the
// neighbour (model/attention_window.cc). Windows 3 and 7 (7: the whole
// neighbouring slice of 6 rows at 4 ranks).
ModelConfig windowed(AttentionKind kind, Objective obj, int64_t window = 3) {
  ModelConfig cfg = test::tiny_config(kind, obj);
  cfg.window = window;
  return cfg;
}
TEST(PackedModel, WindowEqualsEachProteinAlone) {
  for (int64_t window : {int64_t{3}, int64_t{7}})
    for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Favor})
      for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
        SCOPED_TRACE(what(windowed(kind, obj, window), world_size()) + " window=" + std::to_string(window));
        check_against_alone(windowed(kind, obj, window));
      }
}

// Every residue of the 12-token protein of sample 0 (over ranks 1-3 at sp = 4)
// changed: the logits of every other protein's rows are the same bits.
void check_no_leakage(const ModelConfig& cfg) {
  const int P = world_size(), r = world_rank();
  MemoryTracker tracker(Device::cpu());
  std::vector<PackedSample> samples = make_samples(3);
  const int64_t B = static_cast<int64_t>(samples.size()), n = kLength / P, V = cfg.vocab;
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  const Pass before = run_model(cfg, world.get(), packed_slice(samples, 0, B, r * n, (r + 1) * n), tracker);
  std::vector<int32_t>& changed = samples[0].proteins[2].tokens;
  for (size_t i = 0; i + 1 < changed.size(); ++i) changed[i] = 4 + (changed[i] - 4 + 7) % 25;
  const Pass after = run_model(cfg, world.get(), packed_slice(samples, 0, B, r * n, (r + 1) * n), tracker);
  int64_t differing_other = 0, differing_own = 0;
  for (int64_t s = 0; s < B; ++s)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = r * n + i;
      const bool own = s == 0 && pos >= 8 && pos < 20;
      for (int64_t v = 0; v < V; ++v) {
        const size_t k = static_cast<size_t>((s * n + i) * V + v);
        const bool differs = before.logits[k] != after.logits[k];
        (own ? differing_own : differing_other) += differs;
      }
    }
  EXPECT_EQ(differing_other, 0) << what(cfg, P) << " rank " << r;
  int64_t own_anywhere = 0;
  MPI_Allreduce(&differing_own, &own_anywhere, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(own_anywhere, 0) << what(cfg, P) << ": the changed protein's own logits did not change";
}

TEST(PackedModel, NoLeakageBetweenProteins) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) check_no_leakage(test::tiny_config(kind, obj));
  if (world_size() == 1) check_no_leakage(test::tiny_config(AttentionKind::Softmax, Objective::CausalLM));
  check_no_leakage(windowed(AttentionKind::Favor, Objective::CausalLM));
  check_no_leakage(windowed(AttentionKind::Favor, Objective::MaskedLM, 7));
}

// Trainer::evaluate with a group per protein: each group's loss sum and
// token count are those of the protein alone, and the groups add up to the total.
TEST(PackedModel, EvaluationPerProteinGroupEqualsEachProteinAlone) {
  const int P = world_size(), r = world_rank();
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker, host_streams_from_env());
  ParallelGrid grid(make_mpi_comm(MPI_COMM_WORLD), P);
  Trainer trainer(cfg, OptimizerConfig{}, grid, res.ctx());
  const std::vector<PackedSample> samples = make_samples(3);
  const int64_t B = static_cast<int64_t>(samples.size()), n = kLength / P;
  std::vector<int32_t> groups;
  std::vector<const Protein*> proteins;
  for (int64_t s = 0; s < B; ++s) {
    std::vector<int32_t> row(static_cast<size_t>(kLength), -1);
    int64_t x = 0;
    for (const Protein& p : samples[static_cast<size_t>(s)].proteins) {
      for (size_t i = 0; i < p.tokens.size(); ++i)
        row[static_cast<size_t>(x) + i] = static_cast<int32_t>(proteins.size());
      x += static_cast<int64_t>(p.tokens.size());
      proteins.push_back(&p);
    }
    groups.insert(groups.end(), row.begin() + r * n, row.begin() + (r + 1) * n);
  }
  std::vector<EvalStats> per(proteins.size());
  const EvalStats total = trainer.evaluate(packed_slice(samples, 0, B, r * n, (r + 1) * n), &groups, &per);
  double sum = 0;
  int64_t tokens = 0;
  for (size_t g = 0; g < proteins.size(); ++g) {
    PerformerModel alone_model(cfg, res.ctx(), nullptr);
    const ForwardResult a = alone_model.forward(make_model_input(cfg, alone(*proteins[g]), kEvalMaskStep), 0);
    EXPECT_NEAR(per[g].loss_sum, a.loss_sum, 1e-5 * std::abs(a.loss_sum) + 1e-6) << "protein " << g;
    EXPECT_EQ(per[g].tokens, a.count) << "protein " << g;
    EXPECT_EQ(per[g].correct, a.correct) << "protein " << g;
    sum += per[g].loss_sum;
    tokens += per[g].tokens;
  }
  EXPECT_NEAR(sum, total.loss_sum, 1e-5 * total.loss_sum);
  EXPECT_EQ(tokens, total.tokens);
}

test::TrainResult train(const ModelConfig& cfg, ParallelGrid& grid, MemoryTracker& tracker) {
  const std::vector<PackedSample> samples = make_samples(3);
  const int64_t per_dp = static_cast<int64_t>(samples.size()) / grid.dp_size(), n = kLength / grid.sp_size();
  return test::train_three_steps(
      cfg, grid, tracker,
      packed_slice(samples, grid.dp_rank() * per_dp, per_dp, grid.sp_rank() * n, (grid.sp_rank() + 1) * n));
}

void check_training(AttentionKind kind, Objective obj, int sp) {
  const ModelConfig cfg = test::tiny_config(kind, obj);
  MemoryTracker tracker(Device::cpu());
  ParallelGrid local(make_local_comm(), 1);
  const test::TrainResult want = train(cfg, local, tracker);
  ParallelGrid grid(make_mpi_comm(MPI_COMM_WORLD), sp);
  test::expect_same_training(train(cfg, grid, tracker), want, what(cfg, sp) + " dp=" + std::to_string(grid.dp_size()));
}

TEST(PackedModel, ThreeAdamWStepsMatchOneRank) {
  for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Relu})
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      check_training(kind, obj, world_size());
      if (world_size() == 4) check_training(kind, obj, 2);  // dp x sp = 2 x 2
    }
}

}  // namespace
}  // namespace pf
