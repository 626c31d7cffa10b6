#include "launch/infer/checkpoint_model.h"

#include <cstdio>

#include "launch/core/checkpoint_file.h"
#include "launch/core/model_rules.h"
#include "launch/core/mpi_program.h"
#include "runtime/check.h"

namespace pf {
namespace {

CheckpointFile open_or_refuse(const std::string& path) {
  try {
    return open_checkpoint(path);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(std::string("--checkpoint: not a usable checkpoint: ") + e.what());
  }
}

// read_checkpoint_config, and the model the file was written by in *stored.
TrainConfig checked_config(const CheckpointFile& checkpoint, const std::vector<std::string>& overrides,
                           ModelConfig* stored) {
  TrainConfig cfg = checkpoint.config(overrides);
  checkpoint.require_protein_vocabulary(cfg.model);
  *stored = checkpoint.stored_model();
  require_loadable_model(checkpoint.path(), *stored, cfg.model);
  // Before a model is built from the stored configuration, whose sizes are
  // only as sound as the file: its tensors must be declared and stored there.
  try {
    checkpoint.check_params(ParamLayout(*stored));
  } catch (const Error& e) {
    throw ConfigError(checkpoint.path() +
                      ": the stored tensors do not fit the stored model configuration (another model "
                      "layout, or a damaged file): " +
                      e.what());
  }
  return cfg;
}

}  // namespace

TrainConfig read_checkpoint_config(const std::string& path, const std::vector<std::string>& overrides) {
  ModelConfig stored;
  return checked_config(open_or_refuse(path), overrides, &stored);
}

CheckpointModel load_checkpoint_model(const std::string& path, const std::vector<std::string>& overrides, int sp) {
  CheckpointModel out;
  out.path = path;
  const CheckpointFile checkpoint = open_or_refuse(path);
  ModelConfig stored;
  out.cfg = checked_config(checkpoint, overrides, &stored);
  out.cfg.parallel.sp = sp;
  out.cfg.checkpoint.resume.clear();
  const int size = launched_ranks();
  PF_REQUIRE(ConfigError, size % sp == 0, sp << " sequence-parallel ranks do not divide the " << size << " launched");
  // The rules of a sequence split over the launched ranks, before anything is built.
  require_softmax_on_one_rank(out.cfg.model, SequenceSplit{sp, path});
  require_window_within_neighbour(out.cfg.model, out.cfg.data.sample_length, SequenceSplit{sp, path});
  out.session = std::make_unique<Session>(out.cfg);
  // Inference writes no checkpoint; its outputs appear only when complete.
  out.session->watchdog().set_ending_advice("no output file of this command was written; run it again");
  out.model = std::make_unique<PerformerModel>(out.cfg.model, out.session->ctx(), &out.session->grid().sp_group(),
                                               out.cfg.parallel.attention);
  // The shapes were checked above: what can fail here is the content (a
  // value that is not finite, named with its tensor) or the read itself. The
  // tensors of the model the file was written by are carried into this one
  // (another attention kind may hold other tensors: carry_parameters).
  const ParamLayout from(stored);
  out.step = checkpoint.metadata().step;
  const std::vector<float> values =
      carry_parameters(out.cfg.model, out.model->layout(), from, checkpoint.read_params(from), &out.initialised);
  Tensor& params = out.model->params();
  copy_bytes(params.stream(), params.raw(), params.device(), values.data(), Device::cpu(), params.nbytes());
  if (out.session->is_root() && !out.initialised.empty())
    std::fprintf(stderr, "%s: not in the checkpoint, initialised: %s\n", path.c_str(),
                 fresh_parameters_text(out.initialised).c_str());
  synchronize(params.stream());
  return out;
}

}  // namespace pf
