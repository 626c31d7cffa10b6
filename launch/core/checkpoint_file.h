// The one reader of checkpoint files (the format: launch/core/checkpoint.h,
// docs/checkpoints.md). Every tool that reads a checkpoint (a resume, its
// choice of file and its pruning, checkpoint.init_from, performer-eval,
// -score, -embed, -generate) opens it here, once, and reads what it needs
// from the open handle:
//   open_checkpoint       opens the file and checks its attributes: the
//                         schema and its version, the metadata checksum, the
//                         step against the optimizer's step, each number
//                         within what a run writes.
//   metadata()            those attributes (a CheckpointState without tensors).
//   config(), stored_model()   the stored configuration, parsed.
//   require_protein_vocabulary   model.vocab and the stored token embedding
//                         against this build's vocabulary (data/vocab.h).
//   check_params          every tensor of a ParamLayout against what the file
//                         declares (present, float32, the layout's shape,
//                         chunks within it, the bytes stored), before
//                         anything is allocated.
//   read_params, read_state   the same checks, then the tensors: /params and,
//                         for a resume, AdamW's moments.
// Two kinds of refusal (is_damaged_checkpoint_error): a damaged file
// (truncated, not HDF5, a checksum that fails, an attribute missing, a
// tensor of another shape or holding NaN) is a DataError / Hdf5Error /
// IoError, which --resume auto skips; a sound file that this build cannot
// read (another schema version) is a ConfigError, which stops the run.
// Whether a sound file holds the model a run wants is a rule of
// launch/core/model_rules.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/h5.h"
#include "launch/core/checkpoint.h"
#include "launch/core/train_config.h"
#include "model/config.h"
#include "model/params.h"
#include "runtime/errors.h"

namespace pf {

class CheckpointFile {
 public:
  const std::string& path() const { return path_; }
  // The attributes; params, m and v are empty.
  const CheckpointState& metadata() const { return metadata_; }
  // The stored configuration with "section.key=value" overrides, as a tool
  // runs it (a ConfigError names the file).
  TrainConfig config(const std::vector<std::string>& overrides = {}) const;
  // The model the file was written by (a ConfigError names the file's
  // "stored configuration").
  ModelConfig stored_model() const;

  // ConfigError unless the stored token embedding has a row per token of
  // this build's protein vocabulary and `model` (read from this file) has
  // that vocabulary: another one would read its token ids as other letters.
  void require_protein_vocabulary(const ModelConfig& model) const;

  // Checks, before any tensor is allocated or read, what the file declares
  // for each tensor of `layout` in /params: present, float32, the layout's
  // shape, chunks within it, and that many bytes stored in the file. A
  // DataError names the file, the tensor, the declared and the expected
  // shape. So a reader allocates what the model needs, not what a file
  // claims, and a model built from a checkpoint's own configuration is no
  // larger than what the file holds: the tools that build one call this
  // before they allocate it.
  void check_params(const ParamLayout& layout) const;
  // check_params, the stored projections against the stored configuration's
  // draw, then every parameter with its checksum, each value finite
  // (DataError / Hdf5Error naming the file and what is wrong; a tensor
  // holding NaN or Inf: the tensor and the element). Flat, `layout` order.
  std::vector<float> read_params(const ParamLayout& layout) const;
  // The same for the parameters and AdamW's moments (/optimizer/m and /v),
  // with the attributes: everything a resume continues from.
  CheckpointState read_state(const ParamLayout& layout) const;

 private:
  friend CheckpointFile open_checkpoint(const std::string& path);
  CheckpointFile(std::string path, H5Id file, CheckpointState metadata)
      : path_(std::move(path)), file_(std::move(file)), metadata_(std::move(metadata)) {}
  void check_tensors(const ParamLayout& layout, bool moments) const;
  CheckpointState read_tensors(const ParamLayout& layout, bool moments) const;

  std::string path_;
  H5Id file_;
  CheckpointState metadata_;
};

// Opens `path` read-only and checks its attributes (above). An IoError for a
// path that does not exist or is a folder (naming the checkpoint inside it);
// DataError for a file that is not a readable HDF5 checkpoint or whose
// attributes are damaged; ConfigError for another schema version.
CheckpointFile open_checkpoint(const std::string& path);

// Whether an error of open_checkpoint or of reading through its handle means
// a damaged file (skipped by --resume auto) rather than a sound one this
// build or model cannot use.
bool is_damaged_checkpoint_error(const Error& e);

}  // namespace pf
