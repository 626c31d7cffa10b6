// What performer-train writes is never a file it did not create or continue
// (docs/checkpoints.md#outputs), in process under mpirun; each refusal is a
// ConfigError naming the key and the file, and leaves every file as it was:
//   - train.metrics that is, through a symbolic or hard link or by its own
//     name, a data file, the configuration file, a checkpoint, the
//     checkpoint folder or a lock file;
//   - train.metrics that reaches a live run's metrics file through a
//     symbolic or a hard link (the live run simulated by holding its locks);
//   - a fresh run and an existing file (another run's metrics, or no metrics
//     file at all), a resumed run and a file not of its run;
//   - a resume of run B's checkpoint into run A's checkpoint.dir: A's
//     checkpoints would be replaced by B's at the same steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/session.h"
#include "launch/train/metrics_log.h"
#include "launch/train/run_lock.h"
#include "launch/train/train_loop.h"
#include "tests/e2e/train_fixtures.h"
#include "tests/e2e/train_run.h"
#include "tests/support/error_message.h"
#include "tests/support/mpi_world.h"

namespace pf {
namespace {

using test::set_overrides;
using test::world_rank;
using test::world_size;
namespace fs = std::filesystem;

using test::file_bytes;
using test::train;
using test::with;

// Every regular file of a folder with its bytes.
std::map<std::string, std::string> folder_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().filename().string()] = file_bytes(e.path().string());
  return out;
}

// The refusal of a run with `overrides`: a ConfigError holding every piece,
// with `unchanged` (on rank 0) the same bytes after it as before.
void expect_refused(const std::vector<std::string>& overrides, const std::vector<std::string>& pieces,
                    const std::string& unchanged, const std::string& config_file = "") {
  SCOPED_TRACE(pieces.front());
  const std::string before = file_bytes(unchanged);
  const std::string w = test::expect_error_of<ConfigError>([&] { train(overrides, config_file); });
  for (const std::string& piece : pieces) EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(fs::exists(unchanged));
  EXPECT_TRUE(file_bytes(unchanged) == before) << unchanged << " changed";
}

TEST(TrainOutputs, MetricsNeverGoOverAnInputACheckpointOrALock) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-guard");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::string ckpt = root + "/ckpt", config = root + "/run.toml";
  const std::vector<std::string> base = test::tiny_run(data, root, world_size(), 4);
  EXPECT_EQ(train(with(base, {"train.stop_at=4"})).last_step, 4);
  const std::string ck = checkpoint_path(ckpt, 4);
  const std::string data_link = root + "/data-link.jsonl", ck_link = root + "/ckpt-link.jsonl";
  if (world_rank() == 0) {
    std::ofstream(config) << "[train]\nsteps = 8\n";
    fs::create_symlink(data, data_link);
    fs::create_hard_link(ck, ck_link);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> resume = with(base, {"checkpoint.resume=\"auto\""});
  auto metrics = [&](const std::string& path) { return with(resume, {"train.metrics=\"" + path + "\""}); };
  auto key = [](const std::string& path) { return "train.metrics = '" + path + "'"; };
  expect_refused(metrics(data_link), {key(data_link), "is data.files[0] ('" + data + "')"}, data);
  expect_refused(metrics(config), {key(config), "is the configuration file ('" + config + "')"}, config, config);
  expect_refused(metrics(ck_link), {key(ck_link), "is a checkpoint in checkpoint.dir ('" + ck + "')"}, ck);
  const std::string lock = run_lock_path(ckpt);
  expect_refused(metrics(lock), {key(lock), "is the lock file of checkpoint.dir"}, lock);
  expect_refused(metrics(ckpt), {key(ckpt), "is checkpoint.dir ('" + ckpt + "')"}, ck);
  // Another run's locks (its folder's and its metrics file's), which that run
  // empties when it starts and ends: refused by their names.
  const std::string other_lock = root + "/other/.performer-lock", other_metrics_lock = root + "/other.jsonl.lock";
  const std::string dangling = root + "/dangling.jsonl";
  if (world_rank() == 0) {
    fs::create_directories(root + "/other");
    std::ofstream(other_lock) << "run 0123456789abcdef\n";
    std::ofstream(other_metrics_lock) << "run 0123456789abcdef\n";
    fs::create_symlink(root + "/nowhere/m.jsonl", dangling);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (const std::string& l : {other_lock, other_metrics_lock})
    expect_refused(metrics(l), {key(l), "names a lock file"}, l);
  expect_refused(metrics(dangling), {key(dangling), "is a symbolic link to '" + root + "/nowhere/m.jsonl', which does not exist"}, data);
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(list_checkpoints(ckpt), std::vector<std::string>{ck});
}

// Resuming a run that has reached train.steps changes nothing: no step, no
// checkpoint rewritten, no metrics line repeated.
TEST(TrainOutputs, ResumingAFinishedRunDoesNothing) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-finished");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> base = test::tiny_run(data, root, world_size(), 4);
  EXPECT_EQ(train(base).last_step, 8);
  const std::string ck = checkpoint_path(root + "/ckpt", 8), metrics = root + "/metrics.jsonl";
  const std::string ck_before = file_bytes(ck), metrics_before = file_bytes(metrics);
  const auto ck_time = fs::last_write_time(ck);
  MPI_Barrier(MPI_COMM_WORLD);
  const TrainOutcome again = train(with(base, {"checkpoint.resume=\"auto\""}));
  EXPECT_EQ(again.first_step, 8);
  EXPECT_EQ(again.last_step, 8);
  EXPECT_EQ(again.checkpoint, "");
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(file_bytes(ck) == ck_before) << ck << " changed";
  EXPECT_EQ(fs::last_write_time(ck), ck_time) << ck << " was rewritten";
  EXPECT_TRUE(file_bytes(metrics) == metrics_before) << metrics << " changed";
  EXPECT_EQ(list_checkpoints(root + "/ckpt"), std::vector<std::string>{ck});
}

// A resume under another sample plan (the keys that decide which samples an
// epoch holds) is refused naming each key with both values; with
// checkpoint.allow_data_change it goes on with the loader restarted.
TEST(TrainOutputs, ResumingUnderAnotherSamplePlanIsRefusedNamingTheKeys) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-plan");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::vector<std::string> base = test::tiny_run(data, root, world_size(), 4);
  EXPECT_EQ(train(with(base, {"train.stop_at=4"})).last_step, 4);
  const std::string ck = checkpoint_path(root + "/ckpt", 4);
  const std::vector<std::string> resume = with(base, {"checkpoint.resume=\"auto\""});
  struct Case {
    std::vector<std::string> set;
    std::vector<std::string> says;
  };
  for (const Case& c : {Case{{"data.sample_length=64"}, {"data.sample_length: 48 in the checkpoint, 64 now"}},
                        Case{{"data.seed=7", "data.mode=\"packed\""},
                             {"data.seed: 0 in the checkpoint, 7 now", "data.mode: concat in the checkpoint, packed now"}},
                        Case{{"data.shuffle=false"}, {"data.shuffle: true in the checkpoint, false now"}}}) {
    std::vector<std::string> says = c.says;
    says.push_back(ck + ": the sample plan changed since this checkpoint was written");
    says.push_back("checkpoint.allow_data_change");
    expect_refused(with(resume, c.set), says, ck);
  }
  const TrainOutcome restarted =
      train(with(resume, {"data.sample_length=64", "checkpoint.allow_data_change=true"}));
  EXPECT_EQ(restarted.first_step, 4);
  EXPECT_EQ(restarted.last_step, 8);
}

// The live run holds what performer-train holds: the lock on its metrics file
// and the owner record beside it. A second run reaching that file through a
// link is refused by the lock; with the live run gone, a fresh run still
// never truncates it.
TEST(TrainOutputs, AMetricsFileOfALiveRunIsRefusedUnderAnyName) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-live");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::string live = root + "/live/metrics.jsonl", symlink = root + "/symlink.jsonl",
                    hardlink = root + "/hardlink.jsonl";
  std::unique_ptr<MetricsLog> live_log;
  std::unique_ptr<RunLock> live_lock;
  if (world_rank() == 0) {
    fs::create_directories(root + "/live");
    std::ofstream(live) << "{\"loss\":3.2,\"run_id\":\"0123456789abcdef\",\"step\":1}\n";
    live_log = std::make_unique<MetricsLog>(live, std::vector<GuardedPath>{}, metrics_lock_path(live));
    live_lock = std::make_unique<RunLock>(metrics_lock_path(live), "train.metrics", "0123456789abcdef", nullptr);
    fs::create_symlink(live, symlink);
    fs::create_hard_link(live, hardlink);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> base = test::tiny_run(data, root, world_size(), 4);
  auto second = [&](const std::string& metrics) {
    return with(base, {"train.metrics=\"" + metrics + "\"", "checkpoint.dir=\"" + root + "/second\""});
  };
  expect_refused(second(symlink),
                 {"train.metrics = '" + symlink + "' (the file '" + live + "') is in use by run 0123456789abcdef"},
                 live);
  expect_refused(second(hardlink), {"train.metrics = '" + hardlink + "' is in use by another run"}, live);
  live_log.reset();
  live_lock.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  expect_refused(second(hardlink),
                 {"train.metrics = '" + hardlink + "' already exists", "(metrics of run 0123456789abcdef)",
                  "this run starts at step 0"},
                 live);
  EXPECT_TRUE(list_checkpoints(root + "/second").empty());
}

// A lock file that is a symbolic link (to nothing, or to a file) is refused
// naming it: opening through it would make or lock a file wherever it points.
TEST(TrainOutputs, ALockFileThatIsALinkIsRefused) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-lock-link");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::string ck = root + "/ck", target = root + "/elsewhere/made-by-the-lock";
  if (world_rank() == 0) {
    fs::create_directories(ck);
    fs::create_symlink(target, ck + "/.performer-lock");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> base = test::tiny_run(data, root, world_size(), 4);
  expect_refused(with(base, {"checkpoint.dir=\"" + ck + "\""}),
                 {"'" + ck + "/.performer-lock'", "it is a symbolic link (a run's lock file is never a link)"}, ck);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(root + "/elsewhere"));
}

// A fresh run writes only a new or empty file; a resumed run appends only to
// its own run's metrics, and every line it writes carries that run's id.
TEST(TrainOutputs, MetricsAreWrittenOnlyIntoTheRunsOwnFile) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-own");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::string notes = root + "/notes.txt", other = root + "/other.jsonl", own = root + "/metrics.jsonl";
  if (world_rank() == 0) {
    std::ofstream(notes) << "results of the March runs\nsee the lab book\n";
    std::ofstream(other) << "{\"loss\":3.2,\"run_id\":\"fedcba9876543210\",\"step\":1}\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> base = test::tiny_run(data, root, world_size(), 4);
  auto metrics = [&](const std::vector<std::string>& o, const std::string& path) {
    return with(o, {"train.metrics=\"" + path + "\""});
  };
  expect_refused(metrics(base, notes),
                 {"train.metrics = '" + notes + "' already exists",
                  "it is not a metrics file: its first line is 'results of the March runs'"},
                 notes);
  EXPECT_TRUE(list_checkpoints(root + "/ckpt").empty());
  EXPECT_EQ(train(with(base, {"train.stop_at=4"})).last_step, 4);
  const std::vector<std::string> resume = with(base, {"checkpoint.resume=\"auto\""});
  expect_refused(metrics(resume, notes),
                 {"train.metrics = '" + notes + "': line 1 is not a metrics record ('results of the March runs')"},
                 notes);
  expect_refused(metrics(resume, other),
                 {"train.metrics = '" + other +
                  "': line 1 holds the metrics of run "
                  "fedcba9876543210"},
                 other);
  EXPECT_EQ(train(resume).last_step, 8);
  if (world_rank() == 0) {
    const std::string run_id = open_checkpoint(checkpoint_path(root + "/ckpt", 8)).metadata().run_id;
    std::ifstream in(own);
    int lines = 0;
    for (std::string line; std::getline(in, line); ++lines)
      EXPECT_NE(line.find("\"run_id\":\"" + run_id + "\""), std::string::npos) << line;
    EXPECT_EQ(lines, 9);  // 8 steps and the final validation
  }
}

// Run A trained to step 20 with checkpoints every 5 steps, run B likewise in
// another folder; resuming B's step-10 checkpoint with checkpoint.dir = A
// would write B's ckpt-15 and ckpt-20 over A's. Refused, naming both runs and
// A's files, with every file of A's folder as it was, byte for byte.
TEST(TrainOutputs, AResumeNeverReplacesAnotherRunsCheckpoints) {
  const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "outputs-resume");
  const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
  const std::string a = root + "/a", b = root + "/b";
  auto run = [&](const std::string& dir) {
    return with(test::tiny_run(data, dir, world_size(), 4),
                {"train.steps=20", "checkpoint.interval=5", "checkpoint.keep=10"});
  };
  train(run(a));
  train(run(b));
  const std::map<std::string, std::string> before = folder_bytes(a + "/ckpt");
  const std::string b10 = checkpoint_path(b + "/ckpt", 10);
  const std::string run_a = open_checkpoint(checkpoint_path(a + "/ckpt", 20)).metadata().run_id;
  const std::string run_b = open_checkpoint(b10).metadata().run_id;
  ASSERT_NE(run_a, run_b);
  const std::string w = test::expect_error_of<ConfigError>([&] {
    train(with(run(a), {"checkpoint.resume=\"" + b10 + "\"", "train.metrics=\"" + root + "/resumed.jsonl\""}));
  });
  for (const std::string& piece : std::vector<std::string>{
           "checkpoint.dir = '" + a + "/ckpt' holds 4 checkpoint(s) of another run than the one resumed ('" + b10 +
               "', run " + run_b + " at step 10, from the folder '" + b + "/ckpt')",
           checkpoint_path(a + "/ckpt", 20) + " (run " + run_a + ", step 20: the resumed run would replace it",
           checkpoint_path(a + "/ckpt", 15) + " (run " + run_a + ", step 15: the resumed run would replace it",
           checkpoint_path(a + "/ckpt", 5) + " (run " + run_a + ", step 5)", "Nothing was changed"})
    EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(folder_bytes(a + "/ckpt") == before) << "a file of run A's checkpoint.dir changed";
  EXPECT_FALSE(fs::exists(root + "/resumed.jsonl")) << "the refused run left its metrics file";
  // Into its own folder, or an empty one, the same resume goes on.
  EXPECT_EQ(train(with(run(root + "/c"), {"checkpoint.resume=\"" + b10 + "\""})).first_step, 10);
}

}  // namespace
}  // namespace pf
