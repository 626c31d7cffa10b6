// HDF5 checkpoints with exact resume. One file per checkpoint,
// <dir>/ckpt-<step>.h5, schema "performer-checkpoint" version 2
// (docs/checkpoints.md):
//   /                 attributes: schema, schema_version, step (updates taken),
//                     loader_epoch, loader_sample, config (resolved TOML),
//                     model_seed, redraw_index, dp, sp, created, run_id
//                     (the run that wrote it: docs/checkpoints.md), data
//                     (JSON: each data file's path, size, content digest and
//                     split rule), metadata_checksum (over all of these and
//                     the /optimizer attributes; run_id and data are absent
//                     from files written before they existed)
//   /params/<name>    float32, the parameter's shape ("layer0.qkv.weight" ...)
//   /projections/layer<l>  float32 [m, D]: the random projection of layer l at
//                     this step (favor, relu; elu: the identity; written, never read: docs/checkpoints.md)
//   /optimizer        attributes: step (AdamW's own count, equal to / step),
//                     loss_scale, loss_scale_good_steps
//   /optimizer/m/<name>, /optimizer/v/<name>   AdamW moments, same shapes
// Everything random in a run is keyed by (seed, step, global coordinates), so
// step + seeds + loader position are the whole random state. Parameters are
// stored per named tensor, not per rank, so a checkpoint written on any
// dp x sp layout resumes on any other. Datasets carry Fletcher-32 checksums,
// the attributes one FNV-1a checksum.
// Written by one rank as a ReplaceableOutput (data/replaceable_output.h): to
// "<file>.tmp-<pid>", flushed, fsynced and renamed over nothing or an earlier
// checkpoint: a crash at any point leaves the previous checkpoints intact.
// Read through open_checkpoint (launch/core/checkpoint_file.h), which checks
// a file before anything is allocated and tells a damaged file (skipped by
// --resume auto) from a sound one this run cannot continue (a ConfigError,
// which stops the run: another schema version, or another model by the
// rules of launch/core/model_rules.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "model/params.h"

namespace pf {

struct CheckpointState {
  int64_t step = 0;  // optimizer updates taken
  LoaderPosition loader;
  std::string config_text;
  int64_t dp = 1, sp = 1;           // layout that wrote it (informative)
  std::vector<float> params, m, v;  // flat, ParamLayout order
  double loss_scale = 0;            // the loss scaler's state (model/loss_scaler.h)
  int64_t loss_scale_good_steps = 0;
  // The run that wrote it: a fresh run draws one, a resumed run keeps the id
  // of the checkpoint it resumed from ("" in files written before it existed).
  std::string run_id;
  std::string data;  // data_identities_json of the run's data files ("" in older files)
};

std::string checkpoint_path(const std::string& dir, int64_t step);

// Writes atomically (ReplaceableOutput: temporary name, fsync, rename).
// Hdf5Error / IoError on failure; ConfigError when `path` is anything but
// free or an earlier checkpoint (the trainer sets such a file aside first).
void write_checkpoint(const std::string& path, const CheckpointState& state, const ParamLayout& layout,
                      const ModelConfig& model);

// A checkpoint file given under configuration key `key`
// ("checkpoint.init_from"): ConfigError naming the key and the path when it
// does not exist, is not a regular file, or is a folder (then with the
// newest checkpoint in it, or that it holds none). Cheap: no HDF5 is opened,
// so a run checks it before it creates or locks anything. `otherwise` ends
// the advice (", or auto ..." for checkpoint.resume).
void require_checkpoint_file(const std::string& path, const std::string& key, const std::string& otherwise = "");
// For a folder given where a checkpoint file belongs, in a message: its
// newest checkpoint (the file the user probably meant), or that it holds none.
std::string describe_checkpoints_in(const std::string& dir);

// Checkpoint files in `dir`, newest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);
// The newest checkpoint that opens and reads whole ("" when none). Damaged
// files are skipped and reported through `skipped` (path: reason); a sound
// checkpoint of another model than `current` (require_same_model) or of
// another schema version is a ConfigError, never skipped: a run that skipped
// it would start at step 0 and overwrite it.
std::string latest_valid_checkpoint(const std::string& dir, const ModelConfig& current,
                                    std::vector<std::string>* skipped = nullptr);
// The checkpoints in `dir` written by run `run_id`, newest first, with their
// steps; files whose attributes do not read are left out (not known to be
// that run's), and an empty run_id has none.
std::vector<std::pair<std::string, int64_t>> checkpoints_of_run(const std::string& dir, const std::string& run_id);
// Removes all but the newest `keep` checkpoints written by run `run_id`
// (and stale temporary files). A checkpoint of another run, or one whose
// metadata does not read, is never removed.
void prune_checkpoints(const std::string& dir, int64_t keep, const std::string& run_id);

}  // namespace pf
