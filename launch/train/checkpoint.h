// HDF5 checkpoints with exact resume. One file per checkpoint,
// <dir>/ckpt-<step>.h5, schema "performer-checkpoint" version 1
// (docs/checkpoints.md):
//   /                 attributes: schema, schema_version, step (updates taken),
//                     loader_epoch, loader_sample, config (resolved TOML),
//                     model_seed, redraw_index, data_seed, dp, sp, created
//   /params/<name>    float32, the parameter's shape ("layer0.qkv.weight" ...)
//   /optimizer/m/<name>, /optimizer/v/<name>   AdamW moments, same shapes
// Everything random in a run is keyed by (seed, step, global coordinates), so
// step + seeds + loader position are the whole random state. Parameters are
// stored per named tensor, not per rank, so a checkpoint written on any
// dp x sp layout resumes on any other. Datasets carry Fletcher-32 checksums.
// Written by one rank to "<file>.tmp-<pid>", flushed, fsynced and renamed: a
// crash at any point leaves the previous checkpoints intact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "model/params.h"

namespace pf {

struct CheckpointState {
  int64_t step = 0;  // optimizer updates taken
  LoaderPosition loader;
  std::string config_text;
  int64_t dp = 1, sp = 1;  // layout that wrote it (informative)
  std::vector<float> params, m, v;  // flat, ParamLayout order
  double loss_scale = 0;             // the loss scaler's state (model/loss_scaler.h); 0: not stored
  int64_t loss_scale_good_steps = 0;
};

std::string checkpoint_path(const std::string& dir, int64_t step);

// Writes atomically (temporary name, fsync, rename). Hdf5Error / IoError on failure.
void write_checkpoint(const std::string& path, const CheckpointState& state, const ParamLayout& layout,
                      const ModelConfig& model);

// Reads and validates: schema and version, every parameter present with the
// expected shape, checksums. DataError / Hdf5Error naming the file and what is wrong.
CheckpointState read_checkpoint(const std::string& path, const ParamLayout& layout);

// Differences between two model configurations that change the function a
// checkpoint computes ("model.width: 128 in the checkpoint, 256 now"); empty
// when compatible. chunk and activation checkpointing may differ. With
// attention_may_differ, the keys that choose how attention is computed from
// the same parameters (attention, features, redraw_interval, projection,
// feature_scaling, feature_draw) are not compared: loading the parameters of a
// softmax model into a FAVOR+ one, or evaluating with other random features.
std::vector<std::string> model_incompatibilities(const ModelConfig& stored, const ModelConfig& current,
                                                 bool attention_may_differ = false);

// Checkpoint files in `dir`, newest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);
// The newest checkpoint that opens and validates ("" when none); broken ones
// are reported through `skipped` (path: reason).
std::string latest_valid_checkpoint(const std::string& dir, const ParamLayout& layout,
                                    std::vector<std::string>* skipped = nullptr);
// Removes all but the newest `keep` checkpoints (and stale temporary files).
void prune_checkpoints(const std::string& dir, int64_t keep);

}  // namespace pf
