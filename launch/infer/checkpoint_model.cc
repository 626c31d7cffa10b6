#include "launch/infer/checkpoint_model.h"

#include <algorithm>
#include <cstdio>

#include "data/h5.h"
#include "data/vocab.h"
#include "launch/core/checkpoint.h"
#include "launch/core/mpi_program.h"
#include "runtime/check.h"

namespace pf {
namespace {

CheckpointState read_metadata_or_refuse(const std::string& path) {
  try {
    return read_checkpoint_metadata(path);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(std::string("--checkpoint: not a usable checkpoint: ") + e.what());
  }
}

// The rows of the stored token embedding are the checkpoint's vocabulary
// (model.vocab is not a configuration key: it is this build's).
void require_protein_vocabulary(const std::string& path, const ModelConfig& model) {
  int64_t rows = model.vocab;
  try {
    H5Id f = h5_open_file(path);
    if (h5_exists(f, "params")) {
      H5Id params = h5_open_group(f, "params");
      if (h5_exists(params, "embedding")) {
        H5Id d = h5_open_dataset(params, "embedding");
        const std::vector<int64_t> shape = h5_dataset_shape(d);
        if (!shape.empty()) rows = shape[0];
      }
    }
  } catch (const Hdf5Error& e) {
    throw ConfigError(path + ": not a usable checkpoint: " + e.what());
  }
  PF_REQUIRE(ConfigError, rows == Vocab::kSize && model.vocab == Vocab::kSize,
             path << ": checkpoint of another vocabulary: its token embedding has " << rows
                  << " rows, but this build's protein vocabulary has " << static_cast<int>(Vocab::kSize) << " tokens ("
                  << Vocab::description() << "): its token ids would be read as other letters");
}

// read_checkpoint_config, and the model the file was written by in *stored.
TrainConfig checked_config(const std::string& path, const std::vector<std::string>& overrides, ModelConfig* stored) {
  const CheckpointState metadata = read_metadata_or_refuse(path);
  TrainConfig cfg = parse_train_config_text(metadata.config_text, path, overrides);
  require_protein_vocabulary(path, cfg.model);
  *stored = require_compatible_model(path, metadata, cfg.model, true, "cannot load these parameters into this model");
  // Before a model is built from the stored configuration, whose sizes are
  // only as sound as the file: its tensors must be declared and stored there.
  try {
    check_checkpoint_tensors(path, ParamLayout(*stored), false);
  } catch (const Error& e) {
    throw ConfigError(path +
                      ": the stored tensors do not fit the stored model configuration (another model "
                      "layout, or a damaged file): " +
                      e.what());
  }
  return cfg;
}

}  // namespace

TrainConfig read_checkpoint_config(const std::string& path, const std::vector<std::string>& overrides) {
  ModelConfig stored;
  return checked_config(path, overrides, &stored);
}

CheckpointModel load_checkpoint_model(const std::string& path, const std::vector<std::string>& overrides, int sp) {
  CheckpointModel out;
  out.path = path;
  ModelConfig stored;
  out.cfg = checked_config(path, overrides, &stored);
  out.cfg.parallel.sp = sp;
  out.cfg.checkpoint.resume.clear();
  const int size = launched_ranks();
  PF_REQUIRE(ConfigError, size % sp == 0, sp << " sequence-parallel ranks do not divide the " << size << " launched");
  PF_REQUIRE(ConfigError, out.cfg.model.attention != AttentionKind::Softmax || out.cfg.model.window > 0 || sp == 1,
             path << ": model.attention = softmax needs the whole sequence on one rank, but " << sp
                  << " ranks split it: run on one rank, or with random features (--set model.attention=favor)");
  // A short protein on sp ranks is padded to sp (window - 1) positions
  // (launch/infer/scoring.h), at most one training sample's: a longer
  // window would make the padding, not the proteins, the allocation size.
  const int64_t window = out.cfg.model.window, length = out.cfg.data.sample_length;
  PF_REQUIRE(ConfigError, window == 0 || sp == 1 || sp * (window - 1) <= length,
             path << ": model.window = " << window << " on " << sp << " ranks needs forwards of at least " << sp
                  << " x " << window - 1 << " positions (each rank's window reaches " << window - 1
                  << " rows into its neighbour's), more than the " << length
                  << " of one training sample of this checkpoint (data.sample_length); run on "
                  << std::max<int64_t>(1, length / std::max<int64_t>(1, window - 1)) << " rank(s) or fewer");
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
  const CheckpointState st = read_checkpoint_params(path, from);
  out.step = st.step;
  const std::vector<float> values =
      carry_parameters(out.cfg.model, out.model->layout(), from, st.params, &out.initialised);
  Tensor& params = out.model->params();
  copy_bytes(params.stream(), params.raw(), params.device(), values.data(), Device::cpu(), params.nbytes());
  if (out.session->is_root() && !out.initialised.empty())
    std::fprintf(stderr, "%s: not in the checkpoint, initialised: %s\n", path.c_str(),
                 fresh_parameters_text(out.initialised).c_str());
  synchronize(params.stream());
  return out;
}

}  // namespace pf
