// Scoring and embedding split over the ranks of a Communicator
// (launch/infer/scoring.h, embedding.h), on the launched ranks:
//  - the CPU streams of the environment (the .async entries:
//    PF_CPU_STREAMS=async+jitter=N, every stream a worker queue and the MPI
//    communicator completing on its own) give the results of synchronous
//    streams bit for bit: scores of single and packed proteins, causal and
//    masked, and embeddings (means and per-residue rows, single and packed);
//  - on P ranks they are those of one rank alone (a local communicator), to
//    fp32 rounding;
//  - a rank that stalls before the sums of a context scoring reach rank 0:
//    rank 0's wait in the communicator's reduce is an operation of the
//    watchdog, which fires and names it (the reduce, its size, the root, the
//    communicator and the phase) instead of waiting forever.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launch/infer/context_scoring.h"
#include "launch/infer/embedding.h"
#include "launch/infer/scoring.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/watchdog.h"
#include "tests/model/model_fixtures.h"
#include "tests/support/mpi_world.h"
#include "tests/support/random_protein.h"

namespace pf {
namespace {

std::vector<uint8_t> protein(uint64_t key, int64_t length) { return test::random_protein(29, 0x1f3c, key, length); }

// Short and long, some shorter than the ranks.
const std::vector<std::vector<uint8_t>> kProteins = {protein(1, 1), protein(2, 7), protein(3, 40), protein(4, 13)};

// A model and the communicator its sequence is split over, on CPU streams
// made as `streams` says.
struct Ranked {
  MemoryTracker tracker{Device::cpu()};
  ExecResources res;
  std::unique_ptr<Communicator> comm;
  PerformerModel model;
  Ranked(const ModelConfig& cfg, const HostStreamConfig& streams, bool alone)
      : res(Device::cpu(), tracker, streams),
        comm(alone ? make_local_comm() : make_mpi_comm(MPI_COMM_WORLD, streams)),
        model(cfg, res.ctx(), alone ? nullptr : comm.get()) {
    test::perturb_trained_projections(model);
  }
};

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void expect_same_bits(const SequenceScore& got, const SequenceScore& want, const std::string& what) {
  EXPECT_TRUE(same_bits(got.logprob, want.logprob)) << what << ": logprob";
  EXPECT_TRUE(same_bits(got.top, want.top)) << what << ": top";
  EXPECT_EQ(got.scored, want.scored) << what;
  EXPECT_TRUE(std::memcmp(&got.total, &want.total, sizeof(double)) == 0) << what << ": total";
}

void expect_close(const SequenceScore& got, const SequenceScore& want, const std::string& what) {
  ASSERT_EQ(got.logprob.size(), want.logprob.size()) << what;
  for (size_t i = 0; i < want.logprob.size(); ++i) {
    if (std::isnan(want.logprob[i])) {
      EXPECT_TRUE(std::isnan(got.logprob[i])) << what << " term " << i;
      continue;
    }
    EXPECT_NEAR(got.logprob[i], want.logprob[i], 2e-6 * std::max(1.0, std::abs(want.logprob[i])))
        << what << " term " << i;
  }
  EXPECT_EQ(got.scored, want.scored) << what;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LT(test::rel_l2(got, want), 1e-5) << what;
}

const std::vector<std::pair<AttentionKind, Objective>> kModels = {{AttentionKind::Favor, Objective::CausalLM},
                                                                  {AttentionKind::Relu, Objective::MaskedLM}};

std::string name_of(AttentionKind kind, Objective objective) {
  return std::string(attention_kind_name(kind)) + (objective == Objective::CausalLM ? " clm" : " mlm") + " on " +
         std::to_string(test::world_size()) + " rank(s), " + host_streams_name(host_streams_from_env());
}

TEST(InferComm, ScoresOnTheEnvironmentsStreamsEqualSynchronousOnesAndOneRanks) {
  const int rank = test::world_rank();
  for (const auto& [kind, objective] : kModels) {
    const ModelConfig cfg = test::tiny_config(kind, objective);
    const std::string name = name_of(kind, objective);
    Ranked env(cfg, host_streams_from_env(), false), sync(cfg, HostStreamConfig{}, false),
        alone(cfg, HostStreamConfig{}, true);
    ScoreOptions o;
    o.pll_batch_tokens = 30;
    for (size_t k = 0; k < kProteins.size(); ++k) {
      const SequenceScore got = score_sequence(env.model, kProteins[k], o, *env.comm);
      const SequenceScore want = score_sequence(sync.model, kProteins[k], o, *sync.comm);
      const SequenceScore one = score_sequence(alone.model, kProteins[k], o, *alone.comm);
      if (rank != 0) continue;
      expect_same_bits(got, want, name + ", protein " + std::to_string(k));
      expect_close(got, one, name + ", protein " + std::to_string(k) + " against one rank");
    }
    const std::vector<SequenceScore> got = score_packed(env.model, kProteins, o, *env.comm);
    const std::vector<SequenceScore> want = score_packed(sync.model, kProteins, o, *sync.comm);
    if (rank != 0) continue;
    ASSERT_EQ(got.size(), kProteins.size());
    for (size_t k = 0; k < kProteins.size(); ++k) {
      expect_same_bits(got[k], want[k], name + ", packed " + std::to_string(k));
      expect_close(got[k], score_sequence(alone.model, kProteins[k], o, *alone.comm),
                   name + ", packed " + std::to_string(k) + " against one rank");
    }
  }
}

TEST(InferComm, EmbeddingsOnTheEnvironmentsStreamsEqualSynchronousOnesAndOneRanks) {
  const int rank = test::world_rank();
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  const std::string name = name_of(AttentionKind::Favor, Objective::CausalLM);
  Ranked env(cfg, host_streams_from_env(), false), sync(cfg, HostStreamConfig{}, false),
      alone(cfg, HostStreamConfig{}, true);
  for (const int64_t layer : {int64_t{1}, cfg.layers + 1}) {
    for (size_t k = 0; k < kProteins.size(); ++k) {
      const SequenceEmbedding got = embed_sequence(env.model, kProteins[k], layer, true, 0, *env.comm);
      const SequenceEmbedding want = embed_sequence(sync.model, kProteins[k], layer, true, 0, *sync.comm);
      const SequenceEmbedding one = embed_sequence(alone.model, kProteins[k], layer, true, 0, *alone.comm);
      if (rank != 0) continue;
      const std::string what = name + ", layer " + std::to_string(layer) + ", protein " + std::to_string(k);
      EXPECT_TRUE(same_bits(got.mean, want.mean)) << what << ": mean";
      EXPECT_TRUE(same_bits(got.residues, want.residues)) << what << ": residue rows";
      expect_close(got.mean, one.mean, what + ": mean against one rank");
      expect_close(got.residues, one.residues, what + ": residue rows against one rank");
    }
    const std::vector<SequenceEmbedding> got = embed_packed(env.model, kProteins, layer, true, 0, *env.comm);
    const std::vector<SequenceEmbedding> want = embed_packed(sync.model, kProteins, layer, true, 0, *sync.comm);
    if (rank != 0) continue;
    ASSERT_EQ(got.size(), kProteins.size());
    for (size_t k = 0; k < kProteins.size(); ++k) {
      const std::string what = name + ", layer " + std::to_string(layer) + ", packed " + std::to_string(k);
      EXPECT_TRUE(same_bits(got[k].mean, want[k].mean)) << what << ": mean";
      EXPECT_TRUE(same_bits(got[k].residues, want[k].residues)) << what << ": residue rows";
      const SequenceEmbedding one = embed_sequence(alone.model, kProteins[k], layer, true, 0, *alone.comm);
      expect_close(got[k].mean, one.mean, what + ": mean against one rank");
      expect_close(got[k].residues, one.residues, what + ": residue rows against one rank");
    }
  }
}

// Rank 1 reaches the end of a cached context scoring (whose only exchange is
// the sums into rank 0) seconds after rank 0: rank 0's watchdog (timeout
// 1 s; its abort recorded here instead of ending the job) fires in the
// reduce and names it; the scoring then completes.
TEST(InferComm, AStalledRankFiresTheWatchdogInTheReduce) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs a second rank to stall";
  const int rank = test::world_rank();
  std::atomic<int> fired{0};
  std::mutex mu;
  std::string report;
  Watchdog watchdog(
      1.0, rank, [&fired](int code) { fired = code; },
      [&](const std::string& text) {
        std::lock_guard<std::mutex> lock(mu);
        report += text;
      });
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  std::unique_ptr<Communicator> world = make_mpi_comm(MPI_COMM_WORLD, host_streams_from_env(), &watchdog);
  PerformerModel model(cfg, res.ctx(), world.get());
  const std::vector<std::vector<uint8_t>> context = {kProteins[1], kProteins[3]};
  ContextScorer scorer(model, res.ctx(), context, ScoreOptions{}, *world, true, 2);
  ASSERT_TRUE(scorer.cached());
  world->barrier();
  watchdog.set_phase("the test's scoring");
  if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(4));
  const std::vector<SequenceScore> scores = scorer.score({kProteins[2], kProteins[0]});
  world->barrier();
  if (rank == 1) {
    EXPECT_EQ(fired, 0) << "the rank that stalled waited for no one";
  }
  if (rank != 0) return;  // (a third rank may have waited for rank 1 too, as MPI's reduce goes)
  EXPECT_EQ(fired, kWatchdogExitCode);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_NE(report.find("watchdog on rank 0: no progress for"), std::string::npos) << report;
  EXPECT_NE(report.find("reduce of 41 x f64 (328 B) to rank 0 on rank 0 of " + std::to_string(test::world_size()) +
                        " (mpi), during the test's scoring"),
            std::string::npos)
      << report;
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].scored, 41);
}

}  // namespace
}  // namespace pf
