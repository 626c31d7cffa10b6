// The training loop of performer-train, run on every rank:
//   check the splits of the data files -> resume (config.checkpoint.resume;
//   a checkpoint of another model is a ConfigError, never skipped) -> drop
//   the metrics lines past the resumed step -> for each step: next batch,
//   train step, progress line and metrics (rank 0), validation and
//   checkpoints at their intervals -> final validation and checkpoint.
// SIGTERM/SIGINT on any rank stop every rank at the same step, after a
// checkpoint. A state that is not finite is never saved (TrainingError).
// Progress goes to `log` on rank 0 only.
#pragma once

#include <ostream>
#include <string>

#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/session.h"
#include "launch/core/train_config.h"
#include "launch/train/evaluation.h"
#include "model/trainer.h"

namespace pf {

struct TrainOutcome {
  int64_t first_step = 0;  // step the run started from (after a resume)
  int64_t last_step = 0;   // updates taken when the loop ended
  bool stopped_by_signal = false;
  EvalStats validation;  // the last validation
  double last_loss = 0;
  std::string checkpoint;  // the last checkpoint written ("" when none)
};
// A resume from a checkpoint at train.steps does nothing (no step, no
// validation, no checkpoint, no metrics line) and says so in the log.

TrainOutcome run_training(const TrainConfig& cfg, Session& session, std::ostream& log);

// The planned peak of one rank (model/planner.h, as --plan prints it; the
// forward alone when not `training`) against device.memory_cap and, on the
// CPU, the host's memory: a ConfigError with the planned size and the keys to
// change, before anything is allocated.
void check_memory_plan(const TrainConfig& cfg, Session& session, bool training);

// Loads a checkpoint into the trainer (parameters, moments, step) after
// checking, before any tensor is read, that it belongs to the same model
// (ConfigError listing the differing keys); returns the loader position to
// continue from.
// `metadata` (optional) receives the checkpoint's attributes (no tensors).
LoaderPosition restore_checkpoint(const std::string& path, const TrainConfig& cfg, Trainer& trainer,
                                  CheckpointState* metadata = nullptr);

// Loads only the parameters of a checkpoint (the trainer keeps its step and
// moments), checking require_loadable_model (launch/core/model_rules.h): the
// attention kind and random features of `cfg` replace the stored ones. For
// checkpoint.init_from and for evaluating a checkpoint with another attention
// (performer-eval). Tensors of this model that the checkpoint lacks (exp's
// projections when it holds another kind, a window's gates when it holds
// softmax) start from their initialisation (carry_parameters) and are named
// in `fresh`. Returns the checkpoint's step.
int64_t load_parameters(const CheckpointFile& checkpoint, const TrainConfig& cfg, Trainer& trainer,
                        std::vector<std::string>* fresh = nullptr);

// The checks of load_parameters, reading no tensor: the stored model against
// `cfg` (ConfigError listing the keys), then what the file declares for each
// parameter (CheckpointFile::check_params, a DataError). performer-eval
// builds its model from the checkpoint's own configuration and calls this
// before it allocates one, on the handle it then loads from.
void require_loadable_parameters(const CheckpointFile& checkpoint, const TrainConfig& cfg);

}  // namespace pf
