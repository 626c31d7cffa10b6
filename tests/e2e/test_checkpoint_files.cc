// Checkpoint files and configuration errors: a checkpoint round-trips; a
// truncated, corrupted or foreign file, one whose metadata was changed and one
// from an incompatible model are refused with a message that says why; a
// writer killed with SIGKILL in the middle of a save leaves the previous
// checkpoint intact and loadable; crafted declarations (a tensor of 2^51
// elements, a model of 576 TiB in a small file) are refused before anything
// is allocated, under an address-space limit, and a tensor holding NaN or Inf
// is refused by name. (Configuration mistakes: test_train_config_errors.cc.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <thread>

#include "data/h5.h"
#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/model_rules.h"
#include "launch/core/train_config.h"
#include "launch/infer/checkpoint_model.h"
#include "launch/train/run_lock.h"
#include "launch/train/train_loop.h"
#include "model/model.h"
#include "runtime/exec.h"
#include "runtime/random.h"
#include "tests/support/address_space.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

namespace pf {
namespace {
namespace fs = std::filesystem;

using test::TempDir;

ModelConfig small_model(int64_t width = 32) {
  ModelConfig m;
  m.layers = 2;
  m.width = width;
  m.heads = 2;
  m.ffn = 64;
  m.features = 16;
  return m;
}

// The resolved configuration of a run of model m (stored in its checkpoints).
std::string config_text_of(const ModelConfig& m) {
  return format_train_config(
      load_train_config("", {"model.layers=" + std::to_string(m.layers), "model.width=" + std::to_string(m.width),
                             "model.heads=" + std::to_string(m.heads), "model.ffn=" + std::to_string(m.ffn),
                             "model.features=" + std::to_string(m.features)}));
}

CheckpointState make_state(const ModelConfig& m, int64_t step, uint64_t seed) {
  const ParamLayout layout(m);
  CheckpointState st;
  st.step = step;
  st.loader = LoaderPosition{1, 42};
  st.config_text = config_text_of(m);
  const KeyedRandom r(seed, 1, 2);
  for (auto* v : {&st.params, &st.m, &st.v}) {
    v->resize(static_cast<size_t>(layout.total()));
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<float>(r.uniform(i + v->size() * (v == &st.m)));
  }
  return st;
}

using test::expect_any_error;

using test::expect_error_of;

// Overwrites bytes [at, at + n) of a file with their complement.
void flip_bytes(const std::string& path, size_t at, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::vector<char> bytes(fs::file_size(path));
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  for (size_t i = at; i < at + n; ++i) bytes[i] = static_cast<char>(~bytes[i]);
  f.seekp(0);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Offset of `text` in a file (npos when absent).
size_t find_in_file(const std::string& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes.find(text);
}

TEST(CheckpointFiles, RoundTripAndRetention) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  for (int64_t step : {10, 20, 30, 40}) {
    CheckpointState st = make_state(m, step, step);
    st.run_id = "run-a";
    write_checkpoint(checkpoint_path(dir.path, step), st, layout, m);
  }
  // A newer checkpoint of another run in the same folder.
  CheckpointState other = make_state(m, 50, 50);
  other.run_id = "run-b";
  write_checkpoint(checkpoint_path(dir.path, 50), other, layout, m);
  const CheckpointState back = open_checkpoint(checkpoint_path(dir.path, 30)).read_state(layout);
  const CheckpointState want = make_state(m, 30, 30);
  EXPECT_EQ(back.params, want.params);
  EXPECT_EQ(back.m, want.m);
  EXPECT_EQ(back.v, want.v);
  EXPECT_EQ(back.step, 30);
  EXPECT_EQ(back.loader, want.loader);
  EXPECT_EQ(back.config_text, want.config_text);
  EXPECT_EQ(back.run_id, "run-a");
  // Readable with standard tools: one dataset per named tensor.
  H5Id f = h5_open_file(checkpoint_path(dir.path, 30));
  EXPECT_EQ(h5_dataset_shape(h5_open_dataset(f, "params/layer1.qkv.weight")), (std::vector<int64_t>{96, 32}));
  // Run a keeps its newest 2; run b's newer checkpoint is not run a's to remove.
  prune_checkpoints(dir.path, 2, "run-a");
  EXPECT_EQ(list_checkpoints(dir.path),
            (std::vector<std::string>{checkpoint_path(dir.path, 50), checkpoint_path(dir.path, 40),
                                      checkpoint_path(dir.path, 30)}));
}

// A checkpoint key (checkpoint.init_from) naming a folder, nothing or a FIFO
// is refused naming the key and the path, before any file is opened; a
// folder with the newest checkpoint in it (the file meant, most likely). The
// reader alone, without the key, says the same of a folder.
TEST(CheckpointFiles, AFolderWhereACheckpointBelongsIsNamedWithItsNewest) {
  TempDir dir;
  const ModelConfig m = small_model();
  for (int64_t step : {10, 20})
    write_checkpoint(checkpoint_path(dir.path, step), make_state(m, step, step), ParamLayout(m), m);
  const std::string newest = checkpoint_path(dir.path, 20);
  const std::string key = "checkpoint.init_from";
  test::expect_error_naming<ConfigError>(
      [&] { require_checkpoint_file(dir.path, key); },
      {key + " = '" + dir.path + "' is a folder", "takes a checkpoint file (ckpt-*.h5)",
       "the newest of the 2 checkpoint(s) in it is '" + newest + "'"});
  fs::create_directories(dir.path + "/empty");
  test::expect_error_naming<ConfigError>([&] { require_checkpoint_file(dir.path + "/empty", key); },
                                         {key + " = '" + dir.path + "/empty' is a folder", "it holds no checkpoint"});
  test::expect_error_naming<ConfigError>([&] { require_checkpoint_file(dir.path + "/absent.h5", key); },
                                         {key + " = '" + dir.path + "/absent.h5': no such file"});
  ASSERT_EQ(::mkfifo((dir.path + "/fifo.h5").c_str(), 0600), 0);
  test::expect_error_naming<ConfigError>([&] { require_checkpoint_file(dir.path + "/fifo.h5", key); },
                                         {key + " = '" + dir.path + "/fifo.h5' is not a regular file"});
  require_checkpoint_file(newest, key);  // a checkpoint file passes
  test::expect_error_naming<IoError>([&] { open_checkpoint(dir.path).metadata(); },
                                     {"'" + dir.path + "' is a folder, not a checkpoint file", newest});
}

// require_writable_folder makes a missing checkpoint folder (and its missing
// parents); when the run then fails (the lock released while an exception
// unwinds) and the folder holds only the lock, both go again: a run that
// fails at start-up leaves no empty checkpoint.dir. A run that ends well, a
// folder that was there before and a folder with a file in it are kept.
TEST(CheckpointFiles, AFailedRunRemovesTheEmptyFolderItMade) {
  TempDir dir;
  auto fail_in = [](const std::string& ck, const std::function<void()>& also) {
    try {
      RunLock lock(run_lock_path(ck), "checkpoint.dir = '" + ck + "'", "run-a", nullptr,
                   require_writable_folder(ck, "checkpoint.dir"));
      also();
      throw ConfigError("checkpoint.init_from = 'x' is a folder");
    } catch (const ConfigError&) {
    }
  };
  const std::string made = dir.path + "/new/ck";
  fail_in(made, [] {});
  EXPECT_FALSE(fs::exists(dir.path + "/new")) << "the folders made for a failed run were left";
  const std::string before = dir.path + "/before";
  fs::create_directories(before);
  fail_in(before, [] {});
  EXPECT_TRUE(fs::is_directory(before));
  const std::string used = dir.path + "/used";
  fail_in(used, [&] { std::ofstream(used + "/ckpt-000000001.h5") << "x"; });
  EXPECT_TRUE(fs::exists(used + "/ckpt-000000001.h5"));
  const std::string ok = dir.path + "/ok";
  {
    RunLock lock(run_lock_path(ok), "checkpoint.dir = '" + ok + "'", "run-a", nullptr,
                 require_writable_folder(ok, "checkpoint.dir"));
  }
  EXPECT_TRUE(fs::is_directory(ok)) << "the folder of a run that ended well was removed";
}

// Pruning removes a checkpoint's temporary of a writer that is gone
// ("ckpt-<step>.h5.tmp-<pid>", an HDF5 file) and nothing else: files of the
// user's that only look like temporaries (other names, numbers no pid can
// be, text) stay, and a name with a number too long for a pid is no error.
TEST(CheckpointFiles, PruningRemovesOnlyTheTemporariesOfGoneWriters) {
  TempDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string stale = dir.path + "/ckpt-000000003.h5.tmp-" + std::to_string(dead);
  const std::string hdf5_start("\x89HDF\r\n\x1a\n", 8);
  const std::vector<std::string> users = {dir.path + "/results.h5.tmp-" + std::to_string(dead),
                                          dir.path + "/embeddings.h5.tmp-copy-2024",
                                          dir.path + "/old.h5.tmp-99999999999",
                                          dir.path + "/ckpt-000000004.h5.tmp-99999999999",
                                          dir.path + "/ckpt-000000002.h5.tmp-20240101",  // no pid is that large
                                          dir.path + "/ckpt-000000001.h5.tmp-" + std::to_string(dead)};  // text
  for (const std::string& f : users)
    std::ofstream(f) << (f.find("000000002") != std::string::npos ? hdf5_start : std::string()) << "mine";
  std::ofstream(stale) << hdf5_start << "partial";
  // A link bearing a stale name, to an HDF5 file of the user's: the link is
  // the user's (and so is its target).
  const std::string backup = dir.path + "/backup.h5",
                    link = dir.path + "/ckpt-000000005.h5.tmp-" + std::to_string(dead);
  std::ofstream(backup) << hdf5_start << "kept";
  fs::create_symlink(backup, link);
  EXPECT_NO_THROW(prune_checkpoints(dir.path, 2, "run-a"));
  EXPECT_FALSE(fs::exists(stale));
  for (const std::string& f : users) EXPECT_TRUE(fs::exists(f)) << f;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link))) << link;
  EXPECT_TRUE(fs::exists(backup));
}

// The checkpoint stores the random projections the model uses at its step
// (its redraw index), for programs that cannot draw them (the Python
// package); a softmax model has none.
TEST(CheckpointFiles, StoresTheModelsProjectionsOfItsStep) {
  TempDir dir;
  ModelConfig m = small_model();
  m.redraw_interval = 7;
  const ParamLayout layout(m);
  const std::string path = checkpoint_path(dir.path, 30);
  write_checkpoint(path, make_state(m, 30, 3), layout, m);
  MemoryTracker tracker{Device::cpu()};
  ExecResources res{Device::cpu(), tracker};
  PerformerModel model(m, res.ctx(), nullptr);
  H5Id f = h5_open_file(path);
  EXPECT_EQ(h5_read_attr_int64(f, "redraw_index"), 4);
  for (int64_t l = 0; l < m.layers; ++l) {
    std::vector<int64_t> shape;
    const std::vector<float> stored = h5_read_array<float>(f, "projections/layer" + std::to_string(l), &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{m.features, m.head_dim()}));
    const float* used = model.projection(l, 30);
    EXPECT_EQ(stored, std::vector<float>(used, used + m.features * m.head_dim())) << "layer " << l;
    const float* first = model.projection(l, 0);  // another redraw: another matrix
    EXPECT_NE(stored, std::vector<float>(first, first + m.features * m.head_dim())) << "layer " << l;
  }
  ModelConfig s = small_model();
  s.attention = AttentionKind::Softmax;
  const std::string softmax_path = checkpoint_path(dir.path, 40);
  write_checkpoint(softmax_path, make_state(s, 40, 4), ParamLayout(s), s);
  EXPECT_FALSE(h5_exists(h5_open_file(softmax_path), "projections"));
}

// Projections changed after the file was written (HDF5 recomputes a
// rewritten dataset's checksum): this build would draw its own and the Python
// package read the stored ones, two models from one file, so it is refused
// as damaged, naming the layer.
TEST(CheckpointFiles, ChangedProjectionsAreRefused) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string path = checkpoint_path(dir.path, 5);
  write_checkpoint(path, make_state(m, 5, 5), layout, m);
  EXPECT_NO_THROW(open_checkpoint(path).read_state(layout));
  {
    H5Id f = h5_open_file(path, true);
    H5Id g = h5_open_group(f, "projections");
    std::vector<int64_t> shape;
    std::vector<float> w = h5_read_array<float>(g, "layer1", &shape);
    w[3] += 0.5f;
    H5Ldelete(g, "layer1", H5P_DEFAULT);
    h5_write_array<float>(g, "layer1", w.data(), shape, H5Layout{shape[0], 0, true});
  }
  const std::string w = expect_any_error([&] { open_checkpoint(path).read_params(layout); });
  EXPECT_NE(w.find(path + ": damaged checkpoint: /projections/layer1 is not the projection that model.seed"),
            std::string::npos)
      << w;
  // A projection declared at 2^36 values (never written): refused by its
  // shape before anything of that size is read.
  {
    H5Id f = h5_open_file(path, true);
    H5Id g = h5_open_group(f, "projections");
    H5Ldelete(g, "layer0", H5P_DEFAULT);
    const hsize_t dims[2] = {hsize_t{1} << 32, 16}, chunk[2] = {1 << 14, 16};
    H5Id space(H5Screate_simple(2, dims, nullptr));
    H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl, 2, chunk);
    H5Id d(H5Dcreate2(g, "layer0", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  }
  const std::string huge = expect_any_error([&] { open_checkpoint(path).read_params(layout); });
  EXPECT_NE(huge.find(path + ": damaged checkpoint: /projections/layer0 is not the projection that model.seed"),
            std::string::npos)
      << huge;
}

TEST(CheckpointFiles, TruncatedCorruptAndForeignFilesAreRefused) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string good = checkpoint_path(dir.path, 1), truncated = checkpoint_path(dir.path, 2),
                    corrupt = checkpoint_path(dir.path, 3);
  write_checkpoint(good, make_state(m, 1, 1), layout, m);
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(good) / 2);
  std::string w = expect_error_of<DataError>([&] { open_checkpoint(truncated).read_state(layout); });
  EXPECT_NE(w.find(truncated), std::string::npos) << w;
  EXPECT_NE(w.find("not a readable HDF5 checkpoint (truncated or corrupt?)"), std::string::npos) << w;
  EXPECT_NE(w.find("truncated file"), std::string::npos) << w;  // HDF5's own reason: end of file before its end
  // Flip bytes inside the parameter data: the Fletcher-32 checksum catches it.
  // The largest dataset (ffn weights) lies in the middle of the file.
  fs::copy_file(good, corrupt);
  flip_bytes(corrupt, fs::file_size(corrupt) / 2, 64);
  w = expect_error_of<DataError>([&] { open_checkpoint(corrupt).read_state(layout); });
  EXPECT_NE(w.find(corrupt), std::string::npos) << w;
  EXPECT_NE(w.find("damaged checkpoint (a dataset failed to read or its checksum failed)"), std::string::npos) << w;
  EXPECT_NE(w.find("checksum"), std::string::npos) << w;
  // Not a checkpoint at all.
  const std::string foreign = dir.path + "/ckpt-000000009.h5";
  { std::ofstream(foreign) << "not hdf5"; }
  w = expect_any_error([&] { open_checkpoint(foreign).read_state(layout); });
  EXPECT_NE(w.find("not a readable HDF5 checkpoint"), std::string::npos) << w;
  // The newest valid one is found, the broken ones reported.
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_valid_checkpoint(dir.path, m, &skipped), good);
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_EQ(skipped[0].rfind(foreign + ": ", 0), 0u) << skipped[0];
  EXPECT_NE(skipped[1].find("checksum"), std::string::npos) << skipped[1];
  EXPECT_NE(skipped[2].find("truncated"), std::string::npos) << skipped[2];
}

// A tensor rewritten without its Fletcher-32 checksum (as h5repack -f NONE
// does) is refused by name: damage to it could not be detected. A file that
// cannot be read at all (here an I/O error: a link to /proc/self/mem, whose
// first byte is unmapped) is not taken for a damaged one: --resume auto
// stops on it instead of skipping it and starting again at step 0.
TEST(CheckpointFiles, UnchecksummedTensorsAndUnreadableFilesAreRefused) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string good = checkpoint_path(dir.path, 1), bare = checkpoint_path(dir.path, 2);
  write_checkpoint(good, make_state(m, 1, 1), layout, m);
  fs::copy_file(good, bare);
  {
    H5Id f = h5_open_file(bare, true);
    const std::string name = "params/layer1.ffn1.weight";
    std::vector<int64_t> shape;
    const std::vector<float> values = h5_read_array<float>(f, name, &shape);
    ASSERT_GE(H5Ldelete(f, name.c_str(), H5P_DEFAULT), 0);
    const std::vector<hsize_t> d(shape.begin(), shape.end());
    H5Id space(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr));
    H5Id dset(H5Dcreate2(f, name.c_str(), H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  }
  std::string w = expect_error_of<DataError>([&] { open_checkpoint(bare).read_state(layout); });
  for (const std::string piece : {bare, std::string("/params/layer1.ffn1.weight carries no Fletcher-32 checksum")})
    EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_valid_checkpoint(dir.path, m, &skipped), good);
  ASSERT_EQ(skipped.size(), 1u);

  char byte = 0;
  const int fd = ::open("/proc/self/mem", O_RDONLY);
  const bool fails = fd >= 0 && ::read(fd, &byte, 1) < 0;
  if (fd >= 0) ::close(fd);
  if (!fails) GTEST_SKIP() << "reading /proc/self/mem at 0 does not fail here";
  const std::string unreadable = checkpoint_path(dir.path, 3);
  fs::create_symlink("/proc/self/mem", unreadable);
  w = expect_error_of<ConfigError>([&] { latest_valid_checkpoint(dir.path, m, &skipped); });
  for (const std::string piece :
       {"checkpoint '" + unreadable + "' cannot be read: ", std::string("not taken for a damaged one")})
    EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
}

// Every attribute is covered by the metadata checksum, and the step must
// equal the optimizer's own: one changed value or byte is a damaged file,
// which open_checkpoint refuses and latest_valid_checkpoint skips.
TEST(CheckpointFiles, ChangedMetadataIsRefused) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string good = checkpoint_path(dir.path, 1);
  write_checkpoint(good, make_state(m, 1, 1), layout, m);
  int64_t step = 2;
  auto damaged = [&](const std::function<void(hid_t file)>& change) {
    const std::string path = checkpoint_path(dir.path, step++);
    fs::copy_file(good, path);
    H5Id f = h5_open_file(path, true);
    change(f.get());
    return path;
  };
  const std::string sample = damaged([](hid_t f) { h5_write_attr_int64(f, "loader_sample", 43); });
  std::string w = expect_error_of<DataError>([&] { open_checkpoint(sample).read_state(layout); });
  EXPECT_NE(w.find(sample + ": damaged checkpoint: the metadata checksum does not match"), std::string::npos) << w;
  const std::string root_step = damaged([](hid_t f) { h5_write_attr_int64(f, "step", 7); });
  w = expect_error_of<DataError>([&] { open_checkpoint(root_step).read_state(layout); });
  EXPECT_NE(w.find("step 7 but the optimizer's step is 1"), std::string::npos) << w;
  const std::string opt_step = damaged([](hid_t f) { h5_write_attr_int64(h5_open_group(f, "optimizer"), "step", 3); });
  w = expect_error_of<DataError>([&] { open_checkpoint(opt_step).read_state(layout); });
  EXPECT_NE(w.find("step 1 but the optimizer's step is 3"), std::string::npos) << w;
  const std::string scale =
      damaged([](hid_t f) { h5_write_attr_double(h5_open_group(f, "optimizer"), "loss_scale", 2.0); });
  w = expect_error_of<DataError>([&] { open_checkpoint(scale).read_state(layout); });
  EXPECT_NE(w.find("metadata checksum does not match"), std::string::npos) << w;
  // One byte of the stored configuration, changed in the file itself.
  const std::string config = damaged([](hid_t) {});
  const size_t at = find_in_file(config, "eval_batches = 16");
  ASSERT_NE(at, std::string::npos);
  flip_bytes(config, at + std::string("eval_batches = 1").size(), 1);
  w = expect_error_of<DataError>([&] { open_checkpoint(config).read_state(layout); });
  EXPECT_NE(w.find("metadata checksum does not match"), std::string::npos) << w;
  const std::string unsealed = damaged([](hid_t f) { H5Adelete(f, "metadata_checksum"); });
  w = expect_error_of<DataError>([&] { open_checkpoint(unsealed).read_state(layout); });
  EXPECT_NE(w.find("metadata_checksum is missing"), std::string::npos) << w;
  // Each is skipped, with its reason, for the good one.
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_valid_checkpoint(dir.path, m, &skipped), good);
  EXPECT_EQ(skipped.size(), 6u);
  for (const std::string& s : skipped) EXPECT_NE(s.find("damaged checkpoint"), std::string::npos) << s;
}

// A sound checkpoint that this run cannot continue (another model, another
// schema version) stops --resume auto with a ConfigError; it is not skipped.
TEST(CheckpointFiles, SoundButIncompatibleCheckpointsAreNotSkipped) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  write_checkpoint(checkpoint_path(dir.path, 1), make_state(m, 1, 1), layout, m);
  const std::string path = checkpoint_path(dir.path, 2);
  write_checkpoint(path, make_state(m, 2, 2), layout, m);
  ModelConfig wider = small_model(64);
  std::string w = expect_error_of<ConfigError>([&] { latest_valid_checkpoint(dir.path, wider); });
  EXPECT_NE(w.find(path + ": checkpoint is from an incompatible model configuration"), std::string::npos) << w;
  EXPECT_NE(w.find("model.width: 32 in the checkpoint, 64 now"), std::string::npos) << w;
  ModelConfig deeper = m;
  deeper.layers = 3;
  deeper.ffn = 96;
  w = expect_error_of<ConfigError>([&] { latest_valid_checkpoint(dir.path, deeper); });
  EXPECT_NE(w.find("model.layers: 2 in the checkpoint, 3 now"), std::string::npos) << w;
  EXPECT_NE(w.find("model.ffn: 64 in the checkpoint, 96 now"), std::string::npos) << w;
  {
    H5Id f = h5_open_file(path, true);
    h5_write_attr_int64(f, "schema_version", 1);
  }
  w = expect_error_of<ConfigError>([&] { latest_valid_checkpoint(dir.path, m); });
  EXPECT_NE(w.find(path + ": checkpoint schema version 1, this build reads version 2"), std::string::npos) << w;
}

TEST(CheckpointFiles, IncompatibleModelIsRefusedWithTheReason) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string path = checkpoint_path(dir.path, 5);
  write_checkpoint(path, make_state(m, 5, 5), layout, m);
  const ModelConfig wider = small_model(64);
  const std::string w = expect_any_error([&] { open_checkpoint(path).read_state(ParamLayout(wider)); });
  EXPECT_NE(w.find("shape"), std::string::npos) << w;
  ModelConfig other = m;
  other.attention = AttentionKind::Relu;
  const auto diff = model_incompatibilities(m, other);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_NE(diff[0].find("model.attention: favor in the checkpoint, relu now"), std::string::npos) << diff[0];
  // Attention kinds may differ for evaluation and init_from, exp too (its
  // projections, which the other kinds lack, then start as FAVOR+'s draw),
  // and not for resuming.
  ModelConfig exp = m;
  exp.attention = AttentionKind::Exp;
  EXPECT_TRUE(model_incompatibilities(m, exp, true).empty());
  EXPECT_TRUE(model_incompatibilities(exp, m, true).empty());
  EXPECT_EQ(model_incompatibilities(m, exp).size(), 1u);
  EXPECT_TRUE(model_incompatibilities(m, other, true).empty());
  ModelConfig exp_norm = exp;
  exp_norm.exp_key_norm = true;
  const auto norm = model_incompatibilities(exp, exp_norm, true);
  ASSERT_EQ(norm.size(), 1u);
  EXPECT_NE(norm[0].find("model.exp_key_norm: false in the checkpoint, true now"), std::string::npos) << norm[0];
  // exp's number of features is the shape of a trained parameter: it cannot
  // change where other kinds may redraw theirs (named as that, not as a
  // damaged file).
  ModelConfig exp_wide = exp;
  exp_wide.features = 2 * exp.features;
  const auto wide = model_incompatibilities(exp, exp_wide, true);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_NE(wide[0].find("model.features: " + std::to_string(exp.features) + " in the checkpoint, " +
                         std::to_string(exp_wide.features) + " now (exp trains its feature map"),
            std::string::npos)
      << wide[0];
  // Keys of named values are named, not numbered.
  ModelConfig iid = m;
  iid.projection = ProjectionKind::Iid;
  iid.feature_scaling = FeatureScaling::SqrtD;
  const auto named = model_incompatibilities(m, iid);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_NE(named[0].find("model.projection: orthogonal in the checkpoint, iid now"), std::string::npos) << named[0];
  EXPECT_NE(named[1].find("model.feature_scaling: chi in the checkpoint, sqrt_d now"), std::string::npos) << named[1];
  ModelConfig other_wide = other;
  other_wide.features = 2 * other.features;
  EXPECT_TRUE(model_incompatibilities(m, other_wide, true).empty());
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
  const CheckpointState st = make_state(big, 1, 1);
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
  EXPECT_EQ(latest_valid_checkpoint(dir.path, big), previous);
  EXPECT_EQ(open_checkpoint(previous).read_state(layout).params, st.params);
  prune_checkpoints(dir.path, 3, "any run");  // removes the dead writer's temporary file
  EXPECT_FALSE(fs::exists(tmp));
}

// fn in a child process whose address space may grow by `headroom` bytes at
// most (RLIMIT_AS, as tests/data/test_split_checks.cc does): the message of
// the Err it throws. Another error, running out of memory (what a reader that
// allocates what a file declares does) or no error is a test failure ("").
template <typename Err>
std::string error_in_child(const std::function<void()>& fn, int64_t headroom = int64_t{256} << 20) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    test::cap_address_space(headroom);
    std::string said = "no error";
    int code = 1;
    try {
      fn();
    } catch (const Err& e) {
      said = e.what();
      code = 0;
    } catch (const std::exception& e) {  // std::bad_alloc included
      said = std::string("another error: ") + e.what();
      code = 2;
    }
    const ssize_t ignored = ::write(pipe_fds[1], said.data(), said.size());
    (void)ignored;
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child said: " << said;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? said : "";
}

// Replaces the dataset `name` of a checkpoint with a float32 one that declares
// `dims` and stores nothing (chunked, no chunk written): a file of a few KB.
void declare_unstored(const std::string& path, const std::string& name, const std::vector<int64_t>& dims) {
  H5Id f = h5_open_file(path, true);
  if (h5_exists(f, name)) {
    ASSERT_GE(H5Ldelete(f, name.c_str(), H5P_DEFAULT), 0) << name;
  }
  const std::vector<hsize_t> d(dims.begin(), dims.end());
  std::vector<hsize_t> chunk(d.size(), 1);
  chunk.back() = std::min<hsize_t>(d.back(), 1024);
  H5Id space(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr));
  H5Id plist(H5Pcreate(H5P_DATASET_CREATE));
  ASSERT_GE(H5Pset_chunk(plist, static_cast<int>(chunk.size()), chunk.data()), 0);
  H5Id dset(H5Dcreate2(f, name.c_str(), H5T_NATIVE_FLOAT, space, H5P_DEFAULT, plist, H5P_DEFAULT));
  ASSERT_TRUE(dset.valid()) << name;
}

// A dataset declaring 2^28 elements (1 GiB) or 2^51 in a small file: refused
// with the declared and the expected shape before the reader allocates
// either, by the trainer's reader and by the tools' (params only).
TEST(CheckpointBounds, CraftedTensorShapesAreRefusedBeforeAllocation) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string good = checkpoint_path(dir.path, 1);
  write_checkpoint(good, make_state(m, 1, 1), layout, m);
  struct Case {
    std::string tensor;
    std::vector<int64_t> declared;
  };
  for (const Case& c : {Case{"params/embedding", {262144, 1024}}, Case{"params/embedding", {int64_t{1} << 31, 1 << 20}},
                        Case{"optimizer/v/layer1.ffn1.weight", {int64_t{1} << 31, 1 << 20}}}) {
    const std::string path = dir.path + "/crafted.h5";
    fs::remove(path);
    fs::copy_file(good, path);
    declare_unstored(path, c.tensor, c.declared);
    EXPECT_LT(fs::file_size(path), 1u << 20);  // a small model's file
    const std::string name = c.tensor.substr(c.tensor.rfind('/') + 1);
    const std::string declared = shape_str(c.declared), expected = shape_str(layout.find(name).shape);
    SCOPED_TRACE(c.tensor + " " + declared);
    const std::string w = error_in_child<DataError>([&] { open_checkpoint(path).read_state(layout); });
    for (const std::string& piece :
         std::vector<std::string>{path, "/" + c.tensor, "has shape " + declared, "the model needs " + expected})
      EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
    if (c.tensor.rfind("params/", 0) == 0) {
      EXPECT_NE(error_in_child<DataError>([&] { open_checkpoint(path).read_params(layout); }).find(declared),
                std::string::npos);
    }
  }
}

// A checkpoint whose stored configuration asks for a model of 576 TiB (the
// largest each shape key allows, with the checksum computed again, as a
// crafter would) over a small model's tensors: the tools that build the model
// from that configuration refuse it before they allocate it. So does a file
// that declares each tensor of a 640 GB model and stores none.
TEST(CheckpointBounds, AStoredConfigurationLargerThanItsFileIsRefusedBeforeTheModelIsBuilt) {
  TempDir dir;
  const ModelConfig m = small_model();
  ModelConfig huge = small_model(65536);
  huge.ffn = 1 << 20;
  huge.layers = 1024;
  EXPECT_GT(ParamLayout(huge).total(), int64_t{1} << 47);  // 576 TiB of float32
  CheckpointState st = make_state(m, 1, 1);
  st.config_text = config_text_of(huge);
  const std::string path = checkpoint_path(dir.path, 1);
  write_checkpoint(path, st, ParamLayout(m), m);
  // As performer-score, -embed and -generate build it (load_checkpoint_model, without its MPI session).
  auto build_model = [&] {
    const TrainConfig cfg = read_checkpoint_config(path, {});
    MemoryTracker tracker{Device::cpu()};
    ExecResources res{Device::cpu(), tracker};
    PerformerModel model(cfg.model, res.ctx(), nullptr);
  };
  std::string w = error_in_child<ConfigError>(build_model);
  for (const std::string& piece :
       std::vector<std::string>{path, "/params/embedding", "has shape [29, 32]", "the model needs [29, 65536]"})
    EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
  // performer-eval's check before it builds its trainer.
  const TrainConfig stored = parse_train_config_text(st.config_text, path);
  w = error_in_child<DataError>([&] { require_loadable_parameters(open_checkpoint(path), stored); });
  EXPECT_NE(w.find("the model needs [29, 65536]"), std::string::npos) << w;

  // Every tensor declared with the huge model's shapes (one layer: 640 GB), none stored.
  huge.layers = 1;
  st.config_text = config_text_of(huge);
  const std::string declared = checkpoint_path(dir.path, 2);
  write_checkpoint(declared, st, ParamLayout(m), m);
  const ParamLayout huge_layout(huge);
  for (const ParamSlice& s : huge_layout.slices()) declare_unstored(declared, "params/" + s.name, s.shape);
  EXPECT_LT(fs::file_size(declared), 1u << 20);
  w = error_in_child<ConfigError>([&] {
    const TrainConfig cfg = read_checkpoint_config(declared, {});
    MemoryTracker tracker{Device::cpu()};
    ExecResources res{Device::cpu(), tracker};
    PerformerModel model(cfg.model, res.ctx(), nullptr);
  });
  for (const std::string& piece : std::vector<std::string>{declared, "/params/embedding of shape [29, 65536]",
                                                           "(7602176 bytes) has only 0 bytes stored"})
    EXPECT_NE(w.find(piece), std::string::npos) << piece << " not in: " << w;
}

// Numbers that no run writes, in a file whose checksum was computed again (as
// write_checkpoint does for any state): refused as damaged, naming the
// attribute and its value, before the step reaches the schedule or AdamW.
TEST(CheckpointBounds, MetadataOutsideWhatARunWritesIsRefusedByName) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  struct Case {
    std::function<void(CheckpointState&)> craft;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](CheckpointState& st) { st.step = -5; }, "the attribute step is -5, below 0"},
      {[](CheckpointState& st) { st.loader.epoch = -1; }, "the attribute loader_epoch is -1, below 0"},
      {[](CheckpointState& st) { st.loader.sample = -7; }, "the attribute loader_sample is -7, below 0"},
      {[](CheckpointState& st) { st.sp = 0; }, "the attribute sp is 0, below 1"},
      {[](CheckpointState& st) { st.loss_scale = std::nan(""); }, "the attribute optimizer/loss_scale is nan"},
      {[](CheckpointState& st) { st.loss_scale = -2; }, "the attribute optimizer/loss_scale is -2"},
  };
  int k = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    CheckpointState st = make_state(m, 3, 3);
    c.craft(st);
    const std::string path = dir.path + "/crafted-" + std::to_string(k++) + ".h5";
    write_checkpoint(path, st, layout, m);
    const std::string w = error_in_child<DataError>([&] { open_checkpoint(path).read_state(layout); });
    EXPECT_NE(w.find(path + ": damaged checkpoint: " + c.says), std::string::npos) << w;
  }
}

// The trainer never saves a value that is not finite, so a checkpoint holding
// one is damaged: refused naming the tensor and the element, and skipped by
// --resume auto.
TEST(CheckpointBounds, NonFiniteValuesAreRefusedNamingTheTensor) {
  TempDir dir;
  const ModelConfig m = small_model();
  const ParamLayout layout(m);
  const std::string good = checkpoint_path(dir.path, 1);
  write_checkpoint(good, make_state(m, 1, 1), layout, m);
  CheckpointState nan_param = make_state(m, 2, 2);
  nan_param.params[static_cast<size_t>(layout.find("layer1.ffn1.weight").offset + 3)] =
      std::numeric_limits<float>::quiet_NaN();
  const std::string with_nan = checkpoint_path(dir.path, 2);
  write_checkpoint(with_nan, nan_param, layout, m);
  CheckpointState inf_moment = make_state(m, 3, 3);
  inf_moment.m[static_cast<size_t>(layout.find("embedding").offset)] = std::numeric_limits<float>::infinity();
  const std::string with_inf = checkpoint_path(dir.path, 3);
  write_checkpoint(with_inf, inf_moment, layout, m);
  std::string w = expect_error_of<DataError>([&] { open_checkpoint(with_nan).read_params(layout); });
  EXPECT_NE(w.find(with_nan + ": /params/layer1.ffn1.weight holds nan (element 3)"), std::string::npos) << w;
  w = expect_error_of<DataError>([&] { open_checkpoint(with_inf).read_state(layout); });
  EXPECT_NE(w.find(with_inf + ": /optimizer/m/embedding holds inf (element 0)"), std::string::npos) << w;
  EXPECT_NO_THROW(open_checkpoint(with_inf).read_params(layout));  // the parameters alone are finite
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_valid_checkpoint(dir.path, m, &skipped), good);
  EXPECT_EQ(skipped.size(), 2u);
}

}  // namespace
}  // namespace pf
