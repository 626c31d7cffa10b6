// What performer-train writes is never a file it did not create or continue,
// in process under mpirun: a resume of run B's checkpoint into run A's
// checkpoint.dir, where A's checkpoints would be replaced by B's at the same
// steps, is a ConfigError naming both runs and A's files, and leaves every
// file of A's folder as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "launch/train/checkpoint.h"
#include "launch/train/session.h"
#include "launch/train/train_loop.h"
#include "tests/e2e/train_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/mpi_world.h"

namespace pf {
namespace {

using test::set_overrides;
using test::world_rank;
using test::world_size;
namespace fs = std::filesystem;

TrainOutcome train(const std::vector<std::string>& overrides) {
  const TrainConfig cfg = load_train_config("", overrides);
  Session session(cfg, MPI_COMM_WORLD);
  std::ostringstream log;
  return run_training(cfg, session, log);
}

std::vector<std::string> with(std::vector<std::string> o, const std::vector<std::string>& extra) {
  set_overrides(o, extra);
  return o;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Every regular file of a folder with its bytes.
std::map<std::string, std::string> folder_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().filename().string()] = file_bytes(e.path().string());
  return out;
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
  const std::string run_a = read_checkpoint_metadata(checkpoint_path(a + "/ckpt", 20)).run_id;
  const std::string run_b = read_checkpoint_metadata(b10).run_id;
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
