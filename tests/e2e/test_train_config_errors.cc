// Configuration mistakes: every kind names its key (a value out of range,
// the value and the range; a wrong type in a file, the file and line); an
// impossible layout says why; the resolved configuration round-trips.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "launch/core/model_rules.h"
#include "launch/core/train_config.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

namespace pf {
namespace {

using test::TempDir;

using test::expect_any_error;
using test::expect_error_of;

TEST(TrainConfigErrors, EachMistakeNamesItsKey) {
  auto error_of = [](const std::vector<std::string>& o) { return expect_any_error([&] { load_train_config("", o); }); };
  EXPECT_NE(error_of({"model.widht=64"}).find("unknown key 'model.widht'"), std::string::npos);
  EXPECT_NE(error_of({"model.layers=\"two\""}).find("model.layers must be an integer"), std::string::npos);
  EXPECT_NE(error_of({"model.attention=linear"}).find("model.attention"), std::string::npos);
  EXPECT_NE(error_of({"model.heads=3"}).find("model.heads must divide model.width"), std::string::npos);
  EXPECT_NE(error_of({"optimizer.lr=-1"}).find("optimizer.lr"), std::string::npos);
  EXPECT_NE(error_of({"device.memory_cap=\"16 parsecs\""}).find("device.memory_cap"), std::string::npos);
  EXPECT_NE(error_of({"nosection.key=1"}).find("unknown key 'nosection.key'"), std::string::npos);
  EXPECT_NE(error_of({"model.dtype=\"fp8\""}).find("model.dtype: unknown type 'fp8'"), std::string::npos);
  EXPECT_NE(error_of({"model.attention_math=\"fp16\""}).find("model.attention_math: unknown arithmetic 'fp16'"),
            std::string::npos);
  const TrainConfig cfg = load_train_config("", {"parallel.sp=3", "data.sample_length=512"});
  EXPECT_NE(expect_any_error([&] { validate_layout(cfg, 4); }).find("parallel.sp = 3 does not divide the 4"),
            std::string::npos);
  EXPECT_NE(expect_any_error([&] { validate_layout(cfg, 3); }).find("data.sample_length = 512 is not divisible"),
            std::string::npos);
  const TrainConfig sm = load_train_config("", {"parallel.sp=2", "model.attention=\"softmax\""});
  EXPECT_NE(expect_any_error([&] { validate_layout(sm, 2); }).find("softmax needs parallel.sp = 1"), std::string::npos);
  // A window crosses ranks when it reaches at most one neighbour's rows.
  const TrainConfig win = load_train_config("", {"parallel.sp=2", "model.window=64", "data.sample_length=128"});
  EXPECT_NO_THROW(validate_layout(win, 2));
  const TrainConfig far = load_train_config("", {"parallel.sp=4", "model.window=34", "data.sample_length=128"});
  EXPECT_NE(expect_any_error([&] {
              validate_layout(far, 4);
            }).find("model.window = 34 reaches 33 rows back, more than the 32 rows of each rank"),
            std::string::npos);
  const TrainConfig wsm = load_train_config("", {"parallel.sp=2", "model.attention=\"softmax\"", "model.window=16"});
  EXPECT_NO_THROW(validate_layout(wsm, 2));
  EXPECT_NE(error_of({"model.window=-1"}).find("model.window = -1 is out of range"), std::string::npos);
  // Training refuses a window longer than its samples, naming key, value and limit.
  const TrainConfig longer = load_train_config("", {"model.window=257", "data.sample_length=256"});
  EXPECT_NE(expect_any_error([&] { validate_training_window(longer); })
                .find("model.window = 257 is longer than data.sample_length = 256"),
            std::string::npos);
  EXPECT_NO_THROW(validate_training_window(load_train_config("", {"model.window=256", "data.sample_length=256"})));
  EXPECT_EQ(load_train_config("", {"device.memory_cap=\"16GiB\""}).device.memory_cap, int64_t{16} << 30);
}

// The inference tools split a protein over the ranks they were launched with
// by the same rules as a run's parallel.sp, in their own words: the
// checkpoint, the ranks, what to change. Their sample length need not divide
// by the ranks; the window rule is then sp x (window - 1) <= sample length.
TEST(TrainConfigErrors, InferenceSplitsFollowTheSameRulesNamingTheCheckpoint) {
  const ModelConfig sm = load_train_config("", {"model.attention=\"softmax\""}).model;
  EXPECT_NO_THROW(require_softmax_on_one_rank(sm, SequenceSplit{1, "ck.h5"}));
  EXPECT_NE(expect_any_error([&] {
              require_softmax_on_one_rank(sm, SequenceSplit{2, "ck.h5"});
            }).find("ck.h5: model.attention = softmax needs the whole sequence on one rank, but 2 ranks split it"),
            std::string::npos);
  const ModelConfig win = load_train_config("", {"model.window=34"}).model;
  EXPECT_NO_THROW(require_softmax_on_one_rank(
      load_train_config("", {"model.attention=\"softmax\"", "model.window=34"}).model, SequenceSplit{2, "ck.h5"}));
  EXPECT_NO_THROW(require_window_within_neighbour(win, 99, SequenceSplit{3, "ck.h5"}));  // 3 x 33 = 99
  const std::string w = expect_any_error([&] { require_window_within_neighbour(win, 98, SequenceSplit{3, "ck.h5"}); });
  EXPECT_NE(w.find("ck.h5: model.window = 34 on 3 ranks needs forwards of at least 3 x 33 positions"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("more than the 98 of one training sample of this checkpoint (data.sample_length); run on 2 "
                   "rank(s) or fewer"),
            std::string::npos)
      << w;
  EXPECT_NO_THROW(require_window_within_neighbour(win, 98, SequenceSplit{1, "ck.h5"}));
}

// A value of the wrong type in a config file: the file, the line, the key and
// the value as written (through --set: the --set text, which holds the value).
TEST(TrainConfigErrors, WrongTypesInAFileNameFileLineKeyAndValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[train]\nsteps = \"ten\"\n", "run.toml:2: train.steps = 'ten' must be an integer"},
      {"[model]\nlayers = 2\nwidth = 32.5\n", "run.toml:3: model.width = 32.5 must be an integer"},
      {"[optimizer]\nlr = \"fast\"\n", "run.toml:2: optimizer.lr = 'fast' must be a number"},
      {"[data]\nfiles = [1, 2]\n", "run.toml:2: data.files = [ 1, 2 ] must hold only strings"},
      {"[model]\ncheckpoint_activations = 1\n", "run.toml:2: model.checkpoint_activations = 1 must be true or false"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string error = expect_error_of<ConfigError>([&] { parse_train_config_text(text, "run.toml"); });
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
}

// Values out of range: a ConfigError (exit code 2) naming the key, the value
// and the allowed range.
TEST(TrainConfigErrors, ValuesOutOfRangeNameKeyValueAndRange) {
  auto error_of = [](const std::vector<std::string>& o) {
    return expect_error_of<ConfigError>([&] { load_train_config("", o); });
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"optimizer.lr=inf", "optimizer.lr = inf is out of range: must be finite (in float32) and > 0"},
      {"optimizer.lr=1e39", "optimizer.lr = 1e+39 is out of range"},
      {"optimizer.lr=0", "optimizer.lr = 0 is out of range"},
      {"optimizer.min_lr=1", "optimizer.min_lr = 1 is out of range: must be in [0, optimizer.lr]"},
      {"optimizer.beta1=1.5", "optimizer.beta1 = 1.5 is out of range: must be in [0, 1)"},
      {"optimizer.beta2=1", "optimizer.beta2 = 1 is out of range: must be in [0, 1)"},
      {"optimizer.beta1=nan", "optimizer.beta1 = nan is out of range"},
      {"optimizer.eps=0", "optimizer.eps = 0 is out of range: must be finite and > 0"},
      {"optimizer.eps=1e-50", "optimizer.eps = 1e-50 is out of range"},
      {"optimizer.weight_decay=-0.1", "optimizer.weight_decay = -0.1 is out of range: must be finite and >= 0"},
      {"optimizer.weight_decay=inf", "optimizer.weight_decay = inf is out of range"},
      {"optimizer.clip_norm=nan", "optimizer.clip_norm = nan is out of range: must be finite"},
      {"optimizer.warmup_steps=2000",
       "optimizer.warmup_steps = 2000 is out of range: must be in [0, train.steps = 1000]"},
      {"optimizer.loss_scale_init=inf", "optimizer.loss_scale_init = inf is out of range"},
      {"optimizer.loss_scale_window=0", "optimizer.loss_scale_window = 0 is out of range: must be >= 1"},
      {"model.width=3000000000", "model.width = 3000000000 is out of range: must be in [1, 65536]"},
      {"model.layers=5000", "model.layers = 5000 is out of range"},
      {"model.ffn=0", "model.ffn = 0 is out of range"},
      {"model.init_std=inf", "model.init_std = inf is out of range"},
  };
  for (const auto& [assignment, message] : cases)
    EXPECT_NE(error_of({assignment}).find(message), std::string::npos)
        << assignment << " -> " << error_of({assignment});
  // Integer keys of every section, and the --set that gave the value.
  const std::vector<std::pair<std::string, std::string>> set_cases = {
      {"data.batch_size=0", "--set 'data.batch_size=0': data.batch_size = 0 is out of range: must be >= 1"},
      // Sizes whose byte counts would overflow the planner (a plan of
      // -8388608 TiB was accepted) or the buckets' shift.
      {"data.sample_length=1152921504606846976",
       "data.sample_length = 1152921504606846976 is out of range: must be in [1, 2^40]"},
      {"data.batch_size=4294967296",
       "data.batch_size = 4294967296 is out of range: must be >= 1, with data.batch_size x data.sample_length <= 2^40"},
      {"parallel.bucket_mib=8796093022208",
       "parallel.bucket_mib = 8796093022208 is out of range: must be in [1, 2^20] (1 TiB)"},
      {"data.sample_length=0", "--set 'data.sample_length=0': data.sample_length = 0 is out of range"},
      {"data.prefetch=-1", "--set 'data.prefetch=-1': data.prefetch = -1 is out of range: must be >= 0"},
      {"checkpoint.keep=0", "--set 'checkpoint.keep=0': checkpoint.keep = 0 is out of range: must be >= 1"},
      {"checkpoint.interval=-5", "--set 'checkpoint.interval=-5': checkpoint.interval = -5 is out of range"},
      {"train.steps=0", "--set 'train.steps=0': train.steps = 0 is out of range: must be >= 1"},
      {"train.stop_at=-1", "--set 'train.stop_at=-1': train.stop_at = -1 is out of range"},
      {"optimizer.min_lr=0.5",
       "--set 'optimizer.min_lr=0.5': optimizer.min_lr = 0.5 is out of range: must be in "
       "[0, optimizer.lr], and optimizer.lr = 0.0003 (configuration)"},
      {"parallel.sp=0", "--set 'parallel.sp=0': parallel.sp = 0 is out of range: must be >= 1"},
      {"parallel.timeout_s=nan", "--set 'parallel.timeout_s=nan': parallel.timeout_s = nan is out of range"},
      {"model.width=0", "--set 'model.width=0': "},
      {"device.comm=\"tcp\"",
       "--set 'device.comm=\"tcp\"': device.comm must be one of auto, mpi, nccl, staged, got 'tcp'"},
  };
  for (const auto& [assignment, message] : set_cases)
    EXPECT_NE(error_of({assignment}).find(message), std::string::npos)
        << assignment << " -> " << error_of({assignment});
  // The same value from a file: the file is named, not a --set.
  TempDir dir;
  const std::string file = dir.path + "/run.toml";
  std::ofstream(file) << "[data]\nbatch_size = 0\n";
  const std::string from_file = expect_error_of<ConfigError>([&] { load_train_config(file, {}); });
  EXPECT_NE(from_file.find(file + ": data.batch_size = 0 is out of range"), std::string::npos) << from_file;
  EXPECT_EQ(from_file.find("--set"), std::string::npos) << from_file;
  // The defaults and ordinary values are accepted.
  const TrainConfig ok = load_train_config("", {"optimizer.beta1=0", "optimizer.weight_decay=0",
                                                "optimizer.clip_norm=0", "optimizer.lr=1e-30", "optimizer.min_lr=0"});
  EXPECT_EQ(ok.optimizer.adamw.beta1, 0.f);
}

// Keys whose values are names: an unknown name is a ConfigError naming the key.
TEST(TrainConfigErrors, UnknownNamesAreConfigErrorsNamingTheKey) {
  auto error_of = [](const std::vector<std::string>& o) {
    return expect_error_of<ConfigError>([&] { load_train_config("", o); });
  };
  std::string w = error_of({"data.mode=chunks"});
  EXPECT_NE(w.find("data.mode must be packed, family, concat or single, got 'chunks'"), std::string::npos) << w;
  w = error_of({"data.sampling=clusters"});
  EXPECT_NE(w.find("data.sampling must be sequence or cluster, got 'clusters'"), std::string::npos) << w;
  EXPECT_EQ(load_train_config("", {"data.sampling=cluster"}).data.sampling, Sampling::Cluster);
  w = error_of({"parallel.scan=tree"});
  EXPECT_NE(w.find("parallel.scan must be one of auto, chain, allgather, recursive_doubling, got 'tree'"),
            std::string::npos)
      << w;
  // Enum keys name where the value came from: the --set, or the file.
  w = error_of({"model.attention=favr"});
  EXPECT_NE(w.find("--set 'model.attention=favr': "), std::string::npos) << w;
  EXPECT_NE(w.find("model.attention: unknown kernel 'favr'"), std::string::npos) << w;
  w = error_of({"optimizer.loss_scale=always"});
  EXPECT_NE(w.find("--set 'optimizer.loss_scale=always': "), std::string::npos) << w;
  EXPECT_NE(w.find("optimizer.loss_scale: unknown mode 'always'"), std::string::npos) << w;
  TempDir dir;
  const std::string file = dir.path + "/run.toml";
  std::ofstream(file) << "[model]\ndtype = \"fp8\"\n";
  w = expect_error_of<ConfigError>([&] { load_train_config(file, {}); });
  EXPECT_NE(w.find(file + ": "), std::string::npos) << w;
  EXPECT_NE(w.find("model.dtype: unknown type 'fp8'"), std::string::npos) << w;
}

// A stop at a step needs checkpoint.dir: without it the stop would save
// nothing. (checkpoint.resume = "auto" without it starts at step 0 and says
// so: the shipped configurations resume automatically, and turning
// checkpoints off with --set checkpoint.dir="" is no mistake.)
TEST(TrainConfigErrors, StopAtNeedsACheckpointFolder) {
  auto error_of = [](const std::vector<std::string>& o) {
    return expect_error_of<ConfigError>([&] { load_train_config("", o); });
  };
  std::string w = error_of({"train.stop_at=3"});
  EXPECT_NE(w.find("--set 'train.stop_at=3': train.stop_at = 3 is out of range: stopping at a step saves a "
                   "checkpoint there, and checkpoint.dir is not set"),
            std::string::npos)
      << w;
  EXPECT_EQ(load_train_config("", {"train.stop_at=3", "checkpoint.dir=runs/a"}).run.stop_at, 3);
  EXPECT_EQ(load_train_config("", {"checkpoint.resume=auto"}).checkpoint.resume, "auto");
}

// A path given as a value (--resume PATH) keeps every character.
TEST(TrainConfigErrors, QuotedPathsKeepQuotesBackslashesAndControlCharacters) {
  for (const std::string path : {"runs/a b/ckpt.h5", "runs/x\\f.h5", "runs/\"q\".h5", "runs/tab\t.h5", "runs/é.h5"}) {
    const TrainConfig c = load_train_config("", {"checkpoint.resume=" + toml_quoted(path)});
    EXPECT_EQ(c.checkpoint.resume, path);
  }
}

// --set takes a bare word as a string, but text that opens a TOML array,
// table or string and does not parse is an error naming the key and the text.
TEST(TrainConfigErrors, MalformedTomlInSetIsAnError) {
  std::string w = expect_error_of<ConfigError>([] { load_train_config("", {"data.files=[\"x.h5\""}); });
  EXPECT_NE(w.find("the value of data.files, [\"x.h5\", is not valid TOML"), std::string::npos) << w;
  w = expect_error_of<ConfigError>([] { load_train_config("", {"data.files=[x.h5]"}); });
  EXPECT_NE(w.find("the value of data.files, [x.h5], is not valid TOML"), std::string::npos) << w;
  w = expect_error_of<ConfigError>([] { load_train_config("", {"checkpoint.dir=\"runs/a"}); });
  EXPECT_NE(w.find("checkpoint.dir"), std::string::npos) << w;
  EXPECT_EQ(load_train_config("", {"data.files=x.h5"}).data.files, std::vector<std::string>{"x.h5"});
  EXPECT_EQ(load_train_config("", {"data.files=[\"x.h5\", \"y.h5\"]"}).data.files,
            (std::vector<std::string>{"x.h5", "y.h5"}));
}

TEST(TrainConfigErrors, FileErrorsNameTheLine) {
  TempDir dir;
  const std::string path = dir.path + "/bad.toml";
  { std::ofstream(path) << "[model]\nlayers = 2\nwidth = = 3\n"; }
  const std::string w = expect_any_error([&] { load_train_config(path, {}); });
  EXPECT_NE(w.find(path + ":3:"), std::string::npos) << w;
}

TEST(TrainConfigErrors, ResolvedConfigurationRoundTrips) {
  const TrainConfig a =
      load_train_config("", {"model.layers=3", "data.files=[\"x.h5\"]", "parallel.sp=2", "parallel.timeout_s=1800"});
  const TrainConfig b = parse_train_config_text(a.source_text, "stored");
  EXPECT_EQ(a.source_text, b.source_text);
  EXPECT_EQ(b.model.layers, 3);
  EXPECT_EQ(b.parallel.sp, 2);
  EXPECT_EQ(b.parallel.timeout_s, 1800);  // the inference tools' watchdog reads it from the checkpoint
  EXPECT_EQ(b.model.attention_math, AttentionMath::Auto);
  for (const char* math : {"fp32", "tf32", "bf16", "auto"}) {
    const TrainConfig c = load_train_config("", {std::string("model.attention_math=\"") + math + "\""});
    EXPECT_STREQ(attention_math_name(c.model.attention_math), math);
    EXPECT_EQ(parse_train_config_text(c.source_text, "stored").model.attention_math, c.model.attention_math);
  }
}

// Every float of the stored configuration reads back as the value that ran
// (a resume restores the loss scale only when loss_scale_init is unchanged),
// written as its shortest decimal.
TEST(TrainConfigErrors, StoredFloatsReadBackExactlyAndShort) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const double lr = unit(rng) * 1e-2, init = std::ldexp(1.0, static_cast<int>(rng() % 30)) + (trial % 3),
                 mlm = 0.01 + 0.98 * unit(rng), clip = unit(rng) * 1e6, std_ = unit(rng) * 0.1;
    const float beta1 = static_cast<float>(unit(rng)) * 0.99f;
    auto set = [](const char* key, double v) {
      std::ostringstream os;
      os << key << "=" << std::setprecision(17) << v;
      return os.str();
    };
    const TrainConfig a = load_train_config(
        "", {set("optimizer.lr", lr), set("optimizer.min_lr", lr / 3), set("optimizer.loss_scale_init", init),
             set("model.mlm_probability", mlm), set("optimizer.clip_norm", clip), set("model.init_std", std_),
             set("optimizer.beta1", beta1), "optimizer.eps=1e-20"});
    const TrainConfig b = parse_train_config_text(a.source_text, "stored");
    ASSERT_EQ(b.optimizer.schedule.max_lr, lr) << a.source_text;
    ASSERT_EQ(b.optimizer.schedule.min_lr, lr / 3);
    ASSERT_EQ(b.optimizer.loss_scale.init, init);
    ASSERT_EQ(b.model.mlm_probability, mlm);
    ASSERT_EQ(b.optimizer.clip_norm, clip);
    ASSERT_EQ(b.model.init_std, std_);
    ASSERT_EQ(b.optimizer.adamw.beta1, beta1);
    ASSERT_EQ(b.optimizer.adamw.eps, 1e-20f);
    ASSERT_EQ(a.source_text, b.source_text);
  }
  const std::string text =
      load_train_config("", {"optimizer.loss_scale_init=1048576", "optimizer.beta1=0.9", "optimizer.min_lr=0.0002"})
          .source_text;
  for (const char* line : {"loss_scale_init = 1048576.0\n", "beta1 = 0.9\n", "min_lr = 0.0002\n", "eps = 1e-08\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
}

}  // namespace
}  // namespace pf
