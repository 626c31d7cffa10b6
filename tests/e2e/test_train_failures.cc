// The training program when something is wrong, in process under mpirun:
//   - --resume auto with a checkpoint of another model shape stops with a
//     ConfigError naming the file and the differing keys, and leaves the
//     checkpoints and the metrics as they were;
//   - a validation or training split that the data files lack is refused
//     before step 1, naming the split, the file and the splits it has;
//   - a loss that is not finite in fp32 stops the run with the step and the
//     loss, without a checkpoint of the broken model;
//   - after a crash and a resume from an earlier checkpoint, the metrics file
//     holds each step once;
//   - a check of the file system made on rank 0 alone gives every rank its
//     refusal (ranks that decide apart would leave some waiting).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/mpi_program.h"
#include "launch/core/session.h"
#include "launch/train/train_loop.h"
#include "model/params.h"
#include "model/planner.h"
#include "runtime/memory.h"
#include "tests/e2e/train_fixtures.h"
#include "tests/e2e/train_run.h"
#include "tests/support/error_message.h"
#include "tests/support/mpi_world.h"

namespace pf {
namespace {

using test::set_override;
using test::set_overrides;
namespace fs = std::filesystem;

using test::world_rank;
using test::world_size;

using test::file_bytes;
using test::train;
using test::with;

using test::expect_error_of;

// Step numbers of the metrics file: step lines and, separately, eval lines.
void metric_steps(const std::string& path, std::vector<int64_t>* steps, std::vector<int64_t>* evals) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const bool eval = line.find("\"eval\"") != std::string::npos;
    const size_t k = line.find("\"step\":");
    ASSERT_NE(k, std::string::npos) << line;
    (eval ? evals : steps)->push_back(std::stoll(line.substr(k + 7)));
  }
}

TEST(TrainFailures, ResumeAutoRefusesACheckpointOfAnotherModelShape) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "shape");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> base = test::tiny_run(data, root, P, 4);
  EXPECT_EQ(train(with(base, {"train.stop_at=4"})).last_step, 4);
  const std::string ck = checkpoint_path(root + "/ckpt", 4);
  const std::string ck_bytes = file_bytes(ck), metrics = file_bytes(root + "/metrics.jsonl");
  for (const std::string change : {"model.width=48", "model.ffn=96", "model.layers=3"}) {
    const std::string key = change.substr(0, change.find('='));
    const std::string w = expect_error_of<ConfigError>([&] {
      train(with(base, {change, "checkpoint.resume=\"auto\""}));
    });
    EXPECT_NE(w.find(ck), std::string::npos) << w;
    EXPECT_NE(w.find(key + ": "), std::string::npos) << w;
    EXPECT_NE(w.find(" in the checkpoint, "), std::string::npos) << w;
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(list_checkpoints(root + "/ckpt"), std::vector<std::string>{ck}) << change;
    EXPECT_TRUE(file_bytes(ck) == ck_bytes) << change << ": the checkpoint was overwritten";
    EXPECT_TRUE(file_bytes(root + "/metrics.jsonl") == metrics) << change << ": the metrics file changed";
  }
  // The same with the file named.
  const std::string w = expect_error_of<ConfigError>([&] {
    train(with(base, {"model.width=48", "checkpoint.resume=\"" + ck + "\""}));
  });
  EXPECT_NE(w.find("model.width: 32 in the checkpoint, 48 now"), std::string::npos) << w;
  // A change that keeps the model (the chunk size) resumes.
  const TrainOutcome ok = train(with(base, {"model.chunk=8", "checkpoint.resume=\"auto\""}));
  EXPECT_EQ(ok.first_step, 4);
  EXPECT_EQ(ok.last_step, 8);
}

TEST(TrainFailures, SplitsAreCheckedBeforeTheFirstStep) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "splits");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> base = test::tiny_run(data, root, P, 4);
  for (const std::string split : {"vaild", "ood"}) {
    const std::string w =
        expect_error_of<ConfigError>([&] { train(with(base, {"data.valid_split=\"" + split + "\""})); });
    EXPECT_NE(w.find("data.valid_split"), std::string::npos) << w;
    EXPECT_NE(w.find("'" + split + "'"), std::string::npos) << w;
    EXPECT_NE(w.find(data), std::string::npos) << w;
    EXPECT_NE(w.find("train, valid, test"), std::string::npos) << w;
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_TRUE(list_checkpoints(root + "/ckpt").empty()) << split << ": the run trained before it checked the split";
    EXPECT_TRUE(test::metric_losses(root + "/metrics.jsonl").empty()) << split;
  }
  const std::string w = expect_error_of<ConfigError>([&] { train(with(base, {"data.train_split=\"tain\""})); });
  EXPECT_NE(w.find("data.train_split"), std::string::npos) << w;
  EXPECT_NE(w.find("'tain'"), std::string::npos) << w;
  // Cluster sampling of a file split by sequence hash.
  const std::string c = expect_error_of<ConfigError>([&] { train(with(base, {"data.sampling=\"cluster\""})); });
  EXPECT_NE(c.find("data.sampling = \"cluster\": '" + data + "' has no clusters (split rule 'sequence')"),
            std::string::npos)
      << c;
  EXPECT_TRUE(list_checkpoints(root + "/ckpt").empty()) << "the run trained before it checked the sampling";
}

// A sample longer than any memory holds (2^40 tokens), and a plan above
// device.memory_cap: refused before anything is allocated, with the planned
// size and the keys to change (it used to end in std::bad_alloc).
TEST(TrainFailures, APlanBeyondMemoryIsRefusedWithItsSize) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "plan");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> base = test::tiny_run(data, root, P, 1);
  const std::string huge = std::to_string(int64_t{1} << 40);
  std::string w = expect_error_of<ConfigError>([&] { train(with(base, {"data.sample_length=" + huge})); });
  EXPECT_NE(w.find("the memory plan of one rank (1 x " + std::to_string((int64_t{1} << 40) / P) + " tokens"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("more than this machine's memory"), std::string::npos) << w;
  EXPECT_NE(w.find("data.sample_length"), std::string::npos) << w;
  w = expect_error_of<ConfigError>([&] { train(with(base, {"device.memory_cap=\"16KiB\""})); });
  EXPECT_NE(w.find("more than device.memory_cap = 16.00 KiB"), std::string::npos) << w;
  // The ranks of one node share its memory: a sample whose plan fits the
  // machine once but not P times is refused too (it was let through, and
  // the kernel killed the run).
  if (P >= 2) {
    const TrainConfig cfg = load_train_config("", base);
    const int64_t host = host_memory_bytes();
    auto peak = [&](int64_t k) {  // sample_length k x P
      return plan_memory(cfg.model, 1, k, true, Device::cpu(), packs_proteins(cfg.data.mode), P).peak;
    };
    int64_t hi = 1;
    while (peak(hi) * P <= host) hi *= 2;
    int64_t lo = hi / 2;  // peak(lo) * P <= host < peak(hi) * P
    while (hi - lo > 1) (peak((lo + hi) / 2) * P <= host ? lo : hi) = (lo + hi) / 2;
    ASSERT_LE(peak(hi), host) << "one rank alone fits";
    w = expect_error_of<ConfigError>([&] { train(with(base, {"data.sample_length=" + std::to_string(hi * P)})); });
    EXPECT_NE(w.find(std::to_string(P) + " ranks on this node: "), std::string::npos) << w;
    EXPECT_NE(w.find("more than this machine's memory"), std::string::npos) << w;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(list_checkpoints(root + "/ckpt").empty());
}

// A learning rate of 1e30 (finite, so valid) blows the parameters up after
// the first update; the second step's loss is not finite.
TEST(TrainFailures, NonFiniteLossInF32StopsTheRunWithoutSavingTheBrokenModel) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "nanloss");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> run =
      with(test::tiny_run(data, root, P, 4), {"optimizer.lr=1e30", "optimizer.min_lr=0", "optimizer.warmup_steps=0",
                                              "optimizer.clip_norm=0", "checkpoint.interval=1", "checkpoint.keep=10"});
  const std::string w = expect_error_of<TrainingError>([&] { train(run); });
  EXPECT_NE(w.find("loss"), std::string::npos) << w;
  EXPECT_NE(w.find("step "), std::string::npos) << w;
  MPI_Barrier(MPI_COMM_WORLD);
  // Every checkpoint left holds finite parameters and moments, and the run
  // ended before train.steps.
  const std::vector<std::string> files = list_checkpoints(root + "/ckpt");
  EXPECT_FALSE(files.empty());
  EXPECT_EQ(std::find(files.begin(), files.end(), checkpoint_path(root + "/ckpt", 8)), files.end());
  const ParamLayout layout(load_train_config("", run).model);
  for (const std::string& f : files) {
    const CheckpointState st = open_checkpoint(f).read_state(layout);
    for (const std::vector<float>* v : {&st.params, &st.m, &st.v})
      EXPECT_TRUE(std::all_of(v->begin(), v->end(), [](float x) { return std::isfinite(x); })) << f;
  }
}

// A crash after step 6 with the last checkpoint at step 4: the resumed run
// replays steps 5 and 6 (and the validation at step 6), and the metrics file
// ends with each step once.
TEST(TrainFailures, MetricsHoldEachStepOnceAfterAResumeFromAnEarlierCheckpoint) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "replay");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> run =
      with(test::tiny_run(data, root, P, 4), {"checkpoint.interval=4", "train.eval_interval=3"});
  EXPECT_EQ(train(with(run, {"train.stop_at=6"})).last_step, 6);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove(checkpoint_path(root + "/ckpt", 6));  // the crash: no checkpoint at 6
  MPI_Barrier(MPI_COMM_WORLD);
  const TrainOutcome resumed = train(with(run, {"checkpoint.resume=\"auto\""}));
  EXPECT_EQ(resumed.first_step, 4);
  EXPECT_EQ(resumed.last_step, 8);
  if (world_rank() == 0) {
    std::vector<int64_t> steps, evals;
    metric_steps(root + "/metrics.jsonl", &steps, &evals);
    EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
    EXPECT_EQ(evals, (std::vector<int64_t>{3, 6, 8}));
  }
}

// check_on_rank0: the check runs on rank 0 only; its ConfigError, message and
// all, is raised on every rank; a check that passes raises nothing anywhere.
TEST(TrainFailures, ACheckOnRankZeroGivesEveryRankItsRefusal) {
  int calls = 0;
  EXPECT_NO_THROW(check_on_rank0(MPI_COMM_WORLD, [&] { ++calls; }));
  EXPECT_EQ(calls, world_rank() == 0 ? 1 : 0);
  calls = 0;
  try {
    check_on_rank0(MPI_COMM_WORLD, [&] {
      ++calls;
      throw ConfigError("--output 'x.tsv' is open in another process");
    });
    ADD_FAILURE() << "rank " << world_rank() << " raised nothing";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--output 'x.tsv' is open in another process");
  }
  EXPECT_EQ(calls, world_rank() == 0 ? 1 : 0);
}

}  // namespace
}  // namespace pf
