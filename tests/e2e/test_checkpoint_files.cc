// Checkpoint files and configuration errors: a checkpoint round-trips; a
// truncated, corrupted or foreign file and one from an incompatible model are
// refused with a message that says why; a writer killed with SIGKILL in the
// middle of a save leaves the previous checkpoint intact and loadable; every
// kind of configuration mistake names its key.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/h5.h"
#include "launch/train/checkpoint.h"
#include "launch/train/train_config.h"
#include "runtime/random.h"

namespace pf {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() / ("pf-ckpt-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

ModelConfig small_model(int64_t width = 32) {
  ModelConfig m;
  m.layers = 2;
  m.width = width;
  m.heads = 2;
  m.ffn = 64;
  m.features = 16;
  return m;
}

CheckpointState make_state(const ParamLayout& layout, int64_t step, uint64_t seed) {
  CheckpointState st;
  st.step = step;
  st.loader = LoaderPosition{1, 42};
  st.config_text = format_train_config(load_train_config("", {"model.width=32", "model.heads=2", "model.ffn=64",
                                                              "model.features=16"}));
  const KeyedRandom r(seed, 1, 2);
  for (auto* v : {&st.params, &st.m, &st.v}) {
    v->resize(static_cast<size_t>(layout.total()));
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<float>(r.uniform(i + v->size() * (v == &st.m)));
  }
  return st;
}

std::string expect_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(CheckpointFiles, RoundTripAndRetention) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  for (int64_t step : {10, 20, 30, 40}) write_checkpoint(checkpoint_path(dir.path, step), make_state(layout, step, step), layout, m);
  const CheckpointState back = read_checkpoint(checkpoint_path(dir.path, 30), layout);
  const CheckpointState want = make_state(layout, 30, 30);
  EXPECT_EQ(back.params, want.params);
  EXPECT_EQ(back.m, want.m);
  EXPECT_EQ(back.v, want.v);
  EXPECT_EQ(back.step, 30);
  EXPECT_EQ(back.loader, want.loader);
  EXPECT_EQ(back.config_text, want.config_text);
  // Readable with standard tools: one dataset per named tensor.
  H5Id f = h5_open_file(checkpoint_path(dir.path, 30));
  EXPECT_EQ(h5_dataset_shape(h5_open_dataset(f, "params/layer1.qkv.weight")), (std::vector<int64_t>{96, 32}));
  prune_checkpoints(dir.path, 2);
  EXPECT_EQ(list_checkpoints(dir.path),
            (std::vector<std::string>{checkpoint_path(dir.path, 40), checkpoint_path(dir.path, 30)}));
}

TEST(CheckpointFiles, TruncatedCorruptAndForeignFilesAreRefused) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string good = checkpoint_path(dir.path, 1), truncated = checkpoint_path(dir.path, 2),
                    corrupt = checkpoint_path(dir.path, 3);
  write_checkpoint(good, make_state(layout, 1, 1), layout, m);
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(good) / 2);
  std::string w = expect_error([&] { read_checkpoint(truncated, layout); });
  EXPECT_NE(w.find(truncated), std::string::npos) << w;
  // Flip bytes inside the parameter data: the Fletcher-32 checksum catches it.
  fs::copy_file(good, corrupt);
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    std::vector<char> bytes(fs::file_size(corrupt));
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    // The largest dataset (ffn weights) lies in the middle of the file.
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] = static_cast<char>(~bytes[i]);
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  w = expect_error([&] { read_checkpoint(corrupt, layout); });
  EXPECT_NE(w.find(corrupt), std::string::npos) << w;
  // Not a checkpoint at all.
  const std::string foreign = dir.path + "/ckpt-000000009.h5";
  { std::ofstream(foreign) << "not hdf5"; }
  w = expect_error([&] { read_checkpoint(foreign, layout); });
  EXPECT_NE(w.find("not a readable HDF5 checkpoint"), std::string::npos) << w;
  // The newest valid one is found, the broken ones reported.
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_valid_checkpoint(dir.path, layout, &skipped), good);
  EXPECT_EQ(skipped.size(), 3u);
}

TEST(CheckpointFiles, IncompatibleModelIsRefusedWithTheReason) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string path = checkpoint_path(dir.path, 5);
  write_checkpoint(path, make_state(layout, 5, 5), layout, m);
  const ModelConfig wider = small_model(64);
  const std::string w = expect_error([&] { read_checkpoint(path, ParamLayout(wider)); });
  EXPECT_NE(w.find("shape"), std::string::npos) << w;
  ModelConfig other = m;
  other.attention = AttentionKind::Relu;
  const auto diff = model_incompatibilities(m, other);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_NE(diff[0].find("model.attention: favor in the checkpoint, relu now"), std::string::npos) << diff[0];
  ModelConfig chunked = m;
  chunked.chunk = 7;
  chunked.checkpoint_activations = true;
  EXPECT_TRUE(model_incompatibilities(m, chunked).empty());
}

TEST(CheckpointFiles, SigkillDuringSaveKeepsThePreviousCheckpoint) {
  TempDir dir;
  ModelConfig big = small_model(256);
  big.ffn = 2048;
  big.layers = 4;  // ~5M parameters: a save takes long enough to be interrupted
  const ParamLayout layout(big);
  const std::string previous = checkpoint_path(dir.path, 1), next = checkpoint_path(dir.path, 2);
  const CheckpointState st = make_state(layout, 1, 1);
  write_checkpoint(previous, st, layout, big);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CheckpointState st2 = st;
    st2.step = 2;
    write_checkpoint(next, st2, layout, big);
    ::_exit(0);
  }
  // Kill the writer once its temporary file has started to fill.
  const std::string tmp = next + ".tmp-" + std::to_string(child);
  bool killed_mid_write = false;
  for (int i = 0; i < 20000; ++i) {
    std::error_code ec;
    if (fs::exists(tmp, ec) && fs::file_size(tmp, ec) > 1024) {
      ::kill(child, SIGKILL);
      killed_mid_write = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(killed_mid_write) << "the writer finished before it could be interrupted";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(next)) << "a half-written checkpoint appeared under its final name";
  EXPECT_EQ(latest_valid_checkpoint(dir.path, layout), previous);
  EXPECT_EQ(read_checkpoint(previous, layout).params, st.params);
  prune_checkpoints(dir.path, 3);  // removes the dead writer's temporary file
  EXPECT_FALSE(fs::exists(tmp));
}

TEST(TrainConfigErrors, EachMistakeNamesItsKey) {
  auto error_of = [](const std::vector<std::string>& o) { return expect_error([&] { load_train_config("", o); }); };
  EXPECT_NE(error_of({"model.widht=64"}).find("unknown key 'model.widht'"), std::string::npos);
  EXPECT_NE(error_of({"model.layers=\"two\""}).find("model.layers must be an integer"), std::string::npos);
  EXPECT_NE(error_of({"model.attention=linear"}).find("model.attention"), std::string::npos);
  EXPECT_NE(error_of({"model.heads=3"}).find("model.heads must divide model.width"), std::string::npos);
  EXPECT_NE(error_of({"optimizer.lr=-1"}).find("optimizer.lr"), std::string::npos);
  EXPECT_NE(error_of({"device.memory_cap=\"16 parsecs\""}).find("device.memory_cap"), std::string::npos);
  EXPECT_NE(error_of({"nosection.key=1"}).find("unknown key 'nosection.key'"), std::string::npos);
  EXPECT_NE(error_of({"model.dtype=\"fp8\""}).find("model.dtype: unknown type 'fp8'"), std::string::npos);
  const TrainConfig cfg = load_train_config("", {"parallel.sp=3", "data.sample_length=512"});
  EXPECT_NE(expect_error([&] { validate_layout(cfg, 4); }).find("parallel.sp = 3 does not divide the 4"),
            std::string::npos);
  EXPECT_NE(expect_error([&] { validate_layout(cfg, 3); }).find("data.sample_length = 512 is not divisible"),
            std::string::npos);
  const TrainConfig sm = load_train_config("", {"parallel.sp=2", "model.attention=\"softmax\""});
  EXPECT_NE(expect_error([&] { validate_layout(sm, 2); }).find("softmax needs parallel.sp = 1"), std::string::npos);
  EXPECT_EQ(load_train_config("", {"device.memory_cap=\"16GiB\""}).device.memory_cap, int64_t{16} << 30);
}

TEST(TrainConfigErrors, FileErrorsNameTheLine) {
  TempDir dir;
  const std::string path = dir.path + "/bad.toml";
  { std::ofstream(path) << "[model]\nlayers = 2\nwidth = = 3\n"; }
  const std::string w = expect_error([&] { load_train_config(path, {}); });
  EXPECT_NE(w.find(path + ":3:"), std::string::npos) << w;
}

TEST(TrainConfigErrors, ResolvedConfigurationRoundTrips) {
  const TrainConfig a = load_train_config("", {"model.layers=3", "data.files=[\"x.h5\"]", "parallel.sp=2"});
  const TrainConfig b = parse_train_config_text(a.source_text, "stored");
  EXPECT_EQ(a.source_text, b.source_text);
  EXPECT_EQ(b.model.layers, 3);
  EXPECT_EQ(b.parallel.sp, 2);
}

}  // namespace
}  // namespace pf
