// A trained model for the inference tools (performer-score, performer-embed,
// performer-generate): the configuration stored in a checkpoint, with
// `--set key=value` overrides (the attention keys may change, as in
// performer-eval: model.attention, features, feature_draw, ...), the session
// of this process (MPI, device, dp x sp grid) and the model with the
// checkpoint's parameters.
// Every refusal of the checkpoint is a ConfigError (exit status 2) naming
// the file and the reason:
//   - not a readable performer checkpoint (not HDF5, another schema, damaged);
//   - another vocabulary: model.vocab differs from the protein vocabulary of
//     this build (data/vocab.h), so token ids would mean other letters;
//   - another model layout: the stored tensors do not have the shapes of the
//     stored configuration, or an override changes the model's shape;
//   - the caller's own requirement (`require`, e.g. a causal objective).
// Random projections are those of the checkpoint's step (its redraw, with
// model.feature_draw), as performer-eval uses them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "launch/core/session.h"
#include "launch/core/train_config.h"
#include "model/model.h"

namespace pf {

struct CheckpointModel {
  std::string path;
  TrainConfig cfg;
  int64_t step = 0;  // updates the checkpoint had taken; the tools use its random projections (as performer-eval)
  std::unique_ptr<Session> session;
  std::unique_ptr<PerformerModel> model;
  // Tensors of this model that the checkpoint lacks (another attention kind
  // through --set: exp's projections, a window's gates), at their
  // initialisation (carry_parameters).
  std::vector<std::string> initialised;
};

// The stored configuration with the overrides applied (no session, no
// tensors read): for the checks a tool makes before it starts.
TrainConfig read_checkpoint_config(const std::string& path, const std::vector<std::string>& overrides);

// Loads `path` into a model whose sequence group has `sp` ranks (dp = world
// size / sp; MPI_COMM_WORLD).
CheckpointModel load_checkpoint_model(const std::string& path, const std::vector<std::string>& overrides, int sp);

}  // namespace pf
