// The configuration of a training run, read from TOML with `--set key=value`
// overrides. Every key is documented in docs/configuration.md; every key has
// a default that works; an unknown key, a value of the wrong type or an
// impossible layout is a ConfigError naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/trainer.h"
#include "runtime/byte_size.h"

namespace pf {

struct DataConfig {
  std::vector<std::string> files;  // shards (performer-protein-v1 or -v2)
  std::string train_split = "train";
  std::string valid_split = "valid";
  SampleMode mode = SampleMode::Concat;
  // Training split only: "cluster" visits each cluster once per epoch, one
  // drawn member per visit (data/cluster_sampling.h); validation always
  // reads every sequence.
  Sampling sampling = Sampling::Sequence;
  int64_t sample_length = 512;
  int64_t batch_size = 8;  // samples per step per data-parallel group
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t prefetch = 2;
};

struct RunConfig {
  int64_t steps = 1000;
  int64_t log_interval = 10;
  int64_t eval_interval = 200;  // 0: only at the end
  int64_t eval_batches = 16;    // validation batches per evaluation (0: the whole split)
  std::string metrics;          // JSON-lines file ("" = none)
  int64_t stop_at = 0;          // stop at this step with a checkpoint, as if preempted (0: never)
};

struct CheckpointConfig {
  std::string dir;         // "" = no checkpoints
  int64_t interval = 200;  // steps between checkpoints (0: only at the end)
  int64_t keep = 3;        // newest files kept
  std::string resume;      // "" (fresh), "auto" (newest valid in dir, else fresh) or a file
  // A checkpoint whose parameters start a fresh run (step 0, zero moments)
  // when there is nothing to resume; its attention keys (model.attention,
  // features, ...) may differ from this run's: e.g. fine-tuning a softmax
  // model with FAVOR+. "" = initialise from model.seed.
  std::string init_from;
  // A resume whose data files differ from those the checkpoint was trained
  // on (content digest, size or split rule) stops with exit 2 naming each
  // change; true continues from the checkpoint's parameters and optimizer on
  // the new data, with the loader restarted at its first sample (fine-tuning
  // on new data on purpose).
  bool allow_data_change = false;
};

struct ParallelConfig {
  int64_t sp = 1;  // sequence-parallel group size; dp = ranks / sp
  AttentionOptions attention;
  int64_t bucket_mib = 16;        // gradient allreduce bucket
  bool overlap_allreduce = true;  // sum gradient buckets while the backward runs
  // Longest wait on another rank without progress before the watchdog ends
  // the job (runtime/watchdog.h); 0: no limit.
  double timeout_s = 600;
};

struct DeviceConfig {
  std::string backend = "auto";  // auto | cpu | cuda
  // Communicator: auto | mpi | nccl | staged. auto: MPI on the CPU; on GPUs
  // NCCL when every node has a GPU per rank, else staged (ranks share GPUs).
  std::string comm = "auto";
  int64_t memory_cap = 0;  // bytes per rank, 0 = none ("16GiB" accepted)
  // CPU streams: sync | async | async+jitter[=SEED] (PF_CPU_STREAMS overrides)
  std::string cpu_streams = "sync";
};

struct TrainConfig {
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  RunConfig run;
  CheckpointConfig checkpoint;
  ParallelConfig parallel;
  DeviceConfig device;
  std::string source_text;  // the resolved configuration as TOML (stored in checkpoints)
  std::string source_path;  // the file it was read from ("" for defaults and --set alone): an input of the run
};

// Reads `path` ("" = defaults only), applies "section.key=value" overrides.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);
// `s` as a TOML basic string ("..." with \\, \" and control characters
// escaped): the value of an override built from a path or other free text.
std::string toml_quoted(const std::string& s);
// Re-reads a configuration from the TOML text stored in a checkpoint, with
// optional "section.key=value" overrides on top.
TrainConfig parse_train_config_text(const std::string& text, const std::string& origin,
                                    const std::vector<std::string>& overrides = {});
// Checks the layout against the launched world: sp divides it, sample length
// divisible by sp, then the model's rules on a split sequence
// (require_softmax_on_one_rank, require_window_within_neighbour in
// launch/core/model_rules.h). ConfigError naming the keys and numbers.
// Training and evaluation, which cut samples of data.sample_length.
void validate_layout(const TrainConfig& cfg, int world_size);
// The part every Session needs, also the inference tools' (which cut no
// sample): sp divides the world, and softmax attention on one rank.
void validate_ranks(const TrainConfig& cfg, int world_size);
// The resolved configuration, every key with its value, as TOML.
std::string format_train_config(const TrainConfig& cfg);

}  // namespace pf
