// Checkpoint and resume of the whole training program, in process, under
// mpirun: N steps uninterrupted and N/2 steps + stop + resume give identical
// losses and parameters, bit for bit, on the same layout; a run saved on one
// dp x sp layout resumes on another (and on one rank) and continues the same
// training to fp32 rounding. Also in the packed and family data modes.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/session.h"
#include "launch/train/train_loop.h"
#include "model/params.h"
#include "tests/e2e/train_fixtures.h"
#include "tests/support/mpi_world.h"
#include "tests/support/numerics.h"
#include "tests/support/synthetic_clusters.h"

namespace pf {
namespace {

using test::set_override;
using test::set_overrides;

using test::world_rank;
using test::world_size;

TrainOutcome train(const std::vector<std::string>& overrides, MPI_Comm comm = MPI_COMM_WORLD) {
  const TrainConfig cfg = load_train_config("", overrides);
  Session session(cfg, comm);
  std::ostringstream log;
  return run_training(cfg, session, log);
}

CheckpointState final_state(const std::string& dir, const TrainConfig& cfg) {
  return open_checkpoint(checkpoint_path(dir + "/ckpt", 8)).read_state(ParamLayout(cfg.model));
}

// Count of lines of a metrics file that contain `text`.
int metric_lines_with(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(text) != std::string::npos;
  return n;
}

// N steps against N/2 + stop + resume on the same layout, with `extra`
// overrides. Returns the work folder (uninterrupted run in a/, resumed in b/).
// With `clustered`, the data file gets synthetic clusters first.
std::string check_stop_and_resume(const std::string& tag, const std::vector<std::string>& extra,
                                  bool clustered = false) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, tag);
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  if (clustered && world_rank() == 0) test::add_synthetic_clusters(data);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string a = root + "/a", b = root + "/b";
  auto run = [&](const std::string& dir) {
    std::vector<std::string> o = test::tiny_run(data, dir, P, 4);
    set_overrides(o, extra);
    return o;
  };
  train(run(a));
  std::vector<std::string> stop = run(b);
  set_override(stop, "train.stop_at=4");
  const TrainOutcome first = train(stop);
  EXPECT_EQ(first.last_step, 4);
  EXPECT_FALSE(first.checkpoint.empty());
  std::vector<std::string> resume = run(b);
  set_override(resume, "checkpoint.resume=\"auto\"");
  const TrainOutcome second = train(resume);
  EXPECT_EQ(second.first_step, 4);
  EXPECT_EQ(second.last_step, 8);
  if (world_rank() == 0) {
    const TrainConfig cfg = load_train_config("", run(a));
    const std::vector<double> la = test::metric_losses(a + "/metrics.jsonl");
    const std::vector<double> lb = test::metric_losses(b + "/metrics.jsonl");
    EXPECT_EQ(la.size(), 8u);
    EXPECT_EQ(la, lb);  // exact
    const CheckpointState sa = final_state(a, cfg), sb = final_state(b, cfg);
    EXPECT_EQ(sa.params, sb.params);
    EXPECT_EQ(sa.m, sb.m);
    EXPECT_EQ(sa.v, sb.v);
    EXPECT_EQ(sa.loader, sb.loader);
    EXPECT_EQ(sa.loss_scale, sb.loss_scale);
    EXPECT_EQ(sa.loss_scale_good_steps, sb.loss_scale_good_steps);
  }
  return root;
}

TEST(TrainResume, StopAndResumeIsBitIdentical) { check_stop_and_resume("resume", {}); }

// Validation every 2 steps: train.stop_at = 4 runs the validation due at step
// 4 before it saves (it used to save first, and the resume never ran it), so
// the stopped and resumed run has the uninterrupted run's 4 validations.
TEST(TrainResume, StopAtRunsTheValidationDueAtItsStep) {
  const std::string root = check_stop_and_resume("resume-eval", {"train.eval_interval=2"});
  if (world_rank() == 0) {
    EXPECT_EQ(metric_lines_with(root + "/a/metrics.jsonl", "\"eval\""), 4);
    EXPECT_EQ(metric_lines_with(root + "/b/metrics.jsonl", "\"eval\""), 4);
  }
}

// Packed samples of 960 tokens (several proteins each, some spanning ranks),
// causal and masked: the resumed run sees the same samples and gives the same bits.
TEST(TrainResume, StopAndResumeIsBitIdenticalInPackedMode) {
  check_stop_and_resume("resume-packed", {"data.mode=\"packed\"", "data.sample_length=960"});
  check_stop_and_resume("resume-packed-mlm",
                        {"data.mode=\"packed\"", "data.sample_length=960", "model.objective=\"mlm\""});
}

// Cluster sampling in single mode, 16 samples a step: epoch 0 (one sample
// per cluster) ends inside the 8 steps, so the resumed run also crosses into
// an epoch of new draws.
TEST(TrainResume, StopAndResumeIsBitIdenticalWithClusterSampling) {
  check_stop_and_resume("resume-cluster", {"data.sampling=\"cluster\"", "data.mode=\"single\"",
                                           "data.batch_size=16"},
                        true);
  check_stop_and_resume("resume-cluster-packed",
                        {"data.sampling=\"cluster\"", "data.mode=\"packed\"", "data.sample_length=960"}, true);
}

// Family contexts (synthetic families of 1-8 members) in samples of 960
// tokens, causal and masked, and with cluster sampling (the first context of
// each family per epoch): the resumed run gives the same bits.
TEST(TrainResume, StopAndResumeIsBitIdenticalInFamilyMode) {
  check_stop_and_resume("resume-family", {"data.mode=\"family\"", "data.sample_length=960"}, true);
  check_stop_and_resume("resume-family-mlm",
                        {"data.mode=\"family\"", "data.sample_length=960", "model.objective=\"mlm\""}, true);
  check_stop_and_resume("resume-family-cluster",
                        {"data.mode=\"family\"", "data.sampling=\"cluster\"", "data.sample_length=960"}, true);
}

// f16 with a dynamic loss scale that starts too high (the first steps overflow
// and are skipped, halving it) and grows again after 2 finite steps, so the
// scale moves across the stop: the resumed run must still match bit for bit.
// 2^25 has 8 significant digits: a stored configuration rounded to 6 read
// back another initial scale, and the resume dropped the saved one.
TEST(TrainResume, StopAndResumeIsBitIdenticalInF16WithAMovingLossScale) {
  const std::vector<std::string> f16 = {"model.dtype=\"f16\"", "optimizer.loss_scale=\"dynamic\"",
                                        "optimizer.loss_scale_init=33554432", "optimizer.loss_scale_window=2"};
  const std::string root = check_stop_and_resume("resume-f16", f16);
  if (world_rank() == 0) {
    const int skipped = metric_lines_with(root + "/a/metrics.jsonl", "\"skipped\":true");
    EXPECT_GE(skipped, 1) << "the initial scale should overflow f16";
    EXPECT_LT(skipped, 8) << "the scale should come down to a usable value";
  }
}

// An f32 checkpoint resumed in f16: the master weights carry over, the loss
// scale starts from the configured one (not the f32 run's 1).
TEST(TrainResume, ResumesInAnotherPrecisionWithItsOwnLossScale) {
  const int P = world_size();
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "resume-dtype");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  std::vector<std::string> stop = test::tiny_run(data, root, P, 4);
  set_override(stop, "train.stop_at=4");
  EXPECT_EQ(train(stop).last_step, 4);
  std::vector<std::string> resume = test::tiny_run(data, root, P, 4);
  for (const char* o : {"checkpoint.resume=\"auto\"", "model.dtype=\"f16\"", "optimizer.loss_scale_init=1024"})
    resume.push_back(o);
  const TrainOutcome second = train(resume);
  EXPECT_EQ(second.first_step, 4);
  EXPECT_EQ(second.last_step, 8);
  if (world_rank() == 0) {
    EXPECT_EQ(metric_lines_with(root + "/metrics.jsonl", "\"loss_scale\":1.0,"), 4);
    EXPECT_EQ(metric_lines_with(root + "/metrics.jsonl", "\"loss_scale\":1024.0,"), 4);
  }
}

TEST(TrainResume, ResumesOnAnotherLayout) {
  const int P = world_size();
  if (P < 2) GTEST_SKIP() << "a change of layout needs at least 2 ranks";
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "layout");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::string a = root + "/a", b = root + "/b", c = root + "/c";
  // Reference: the whole run on 1 x P.
  train(test::tiny_run(data, a, P, 4));
  std::vector<std::string> stop = test::tiny_run(data, b, P, 4);
  set_override(stop, "train.stop_at=4");
  train(stop);
  const TrainConfig cfg = load_train_config("", test::tiny_run(data, a, P, 4));
  const std::vector<double> la = test::metric_losses(a + "/metrics.jsonl");
  const CheckpointState sa = final_state(a, cfg);
  const std::string saved = checkpoint_path(b + "/ckpt", 4);

  // Resume on (P/2) x 2 (or P x 1 at 2 ranks), keeping the global batch of 4.
  const int sp = P == 2 ? 1 : 2, dp = P / sp;
  std::vector<std::string> other = test::tiny_run(data, c, sp, 4 / dp);
  set_override(other, "checkpoint.resume=\"" + saved + "\"");
  train(other);
  if (world_rank() == 0) {
    const std::vector<double> lc = test::metric_losses(c + "/metrics.jsonl");
    ASSERT_EQ(lc.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(lc[i], la[4 + i], 1e-5 * la[4 + i]) << "step " << 5 + i;
    EXPECT_LT(test::rel_l2(final_state(c, cfg).params, sa.params), 1e-5);
  }

  // Resume on one rank (1 x 1).
  if (world_rank() == 0) {
    const std::string d = root + "/d";
    std::vector<std::string> single = test::tiny_run(data, d, 1, 4);
    set_override(single, "checkpoint.resume=\"" + saved + "\"");
    train(single, MPI_COMM_SELF);
    const std::vector<double> ld = test::metric_losses(d + "/metrics.jsonl");
    ASSERT_EQ(ld.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(ld[i], la[4 + i], 1e-5 * la[4 + i]) << "step " << 5 + i;
    EXPECT_LT(test::rel_l2(final_state(d, cfg).params, sa.params), 1e-5);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace pf
