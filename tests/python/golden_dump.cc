// pf_golden_dump: the C++ model's answers on one training batch of a
// checkpoint, for the golden tests of the Python package (tests/python/).
//   pf_golden_dump --checkpoint FILE --output OUT.h5 [--set key=value ...]
// Loads the checkpoint as the inference tools do (one rank, the projections
// of its step), reads the batch the training loader gives at the checkpoint's
// loader position (the batch its next step trains on, with that step's
// masked-LM draw) and writes, readable with h5py:
//   /inputs, /targets  int32 [B, n]     the model input (-1: not predicted)
//   /piece_sample, /piece_begin, /piece_position, /piece_joins  int64 [P]
//                      packed and family batches: each piece of each sample
//                      (model/packed_layout.h; joins = 1 where a family member
//                      continues the state of the member before it)
//   /logits            float32 [B, n, V] the forward's logits
//   /grads/<name>      float32           d(mean token loss)/d(parameter), the first step's gradients
//   attributes: loss_sum (float64), count, correct, step, dtype (the forward's model.dtype)
#include <mpi.h>

#include <CLI/CLI.hpp>

#include "data/h5.h"
#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/mpi_program.h"
#include "launch/core/session.h"
#include "launch/core/tool_cli.h"
#include "launch/infer/checkpoint_model.h"

namespace pf {
namespace {

void write_int32(hid_t loc, const std::string& name, const std::vector<int32_t>& v, const Shape& shape) {
  h5_write_array<int32_t>(loc, name, v.data(), shape, H5Layout{});
}

void write_pieces(hid_t file, const PackedLayout& packed) {
  std::vector<int64_t> sample, begin, position, joins;
  for (size_t b = 0; b < packed.samples.size(); ++b)
    for (const SequencePiece& p : packed.samples[b]) {
      sample.push_back(static_cast<int64_t>(b));
      begin.push_back(p.begin);
      position.push_back(p.position);
      joins.push_back(p.joins ? 1 : 0);
    }
  const Shape shape{static_cast<int64_t>(sample.size())};
  h5_write_array<int64_t>(file, "piece_sample", sample.data(), shape, H5Layout{});
  h5_write_array<int64_t>(file, "piece_begin", begin.data(), shape, H5Layout{});
  h5_write_array<int64_t>(file, "piece_position", position.data(), shape, H5Layout{});
  h5_write_array<int64_t>(file, "piece_joins", joins.data(), shape, H5Layout{});
}

void dump(const std::string& checkpoint, const std::string& output, const std::vector<std::string>& overrides) {
  CheckpointModel cm = load_checkpoint_model(checkpoint, overrides, 1);
  const CheckpointState meta = open_checkpoint(checkpoint).metadata();
  ParallelGrid& grid = cm.session->grid();
  DataLoader loader(loader_options(cm.cfg, grid, cm.cfg.data.train_split, LoaderUse::Training));
  loader.set_position(meta.loader);
  const TokenBatch tb = to_token_batch(loader.next(), grid);
  const ModelInput in = make_model_input(cm.cfg.model, tb, cm.step);
  PerformerModel& model = *cm.model;
  std::vector<float> logits;
  const ForwardResult fr = model.forward(in, cm.step, &logits);
  PF_REQUIRE(ValueError, fr.count > 0, checkpoint << ": the batch predicts no token");
  model.zero_grads();
  model.forward_backward(in, cm.step, 1.0 / static_cast<double>(fr.count));
  std::vector<float> grads(static_cast<size_t>(model.layout().total()));
  copy_bytes(model.grads().stream(), grads.data(), Device::cpu(), model.grads().raw(), model.grads().device(),
             model.grads().nbytes());
  synchronize(model.grads().stream());

  H5Id f = h5_create_file(output);
  const Shape bn{in.batch, in.n};
  write_int32(f, "inputs", in.inputs, bn);
  write_int32(f, "targets", in.targets, bn);
  if (!in.packed.empty()) write_pieces(f, in.packed);
  h5_write_array<float>(f, "logits", logits.data(), {in.batch, in.n, cm.cfg.model.vocab}, H5Layout{});
  H5Id g = h5_create_group(f, "grads");
  for (const ParamSlice& s : model.layout().slices())
    h5_write_array<float>(g, s.name, grads.data() + s.offset, s.shape, H5Layout{});
  h5_write_attr_double(f, "loss_sum", fr.loss_sum);
  h5_write_attr_int64(f, "count", fr.count);
  h5_write_attr_int64(f, "correct", fr.correct);
  h5_write_attr_int64(f, "step", cm.step);
  h5_write_attr_string(f, "dtype", dtype_name(cm.cfg.model.dtype));
}

}  // namespace
}  // namespace pf

int main(int argc, char** argv) {
  CLI::App app{"The C++ model's logits, loss and gradients on a checkpoint's next training batch (golden tests)"};
  std::string checkpoint, output;
  std::vector<std::string> overrides;
  app.add_option("--checkpoint", checkpoint, "checkpoint file")->required();
  app.add_option("--output,-o", output, "HDF5 file to write")->required();
  pf::add_override_option(app, overrides);
  if (const auto status = pf::parse_tool_args(app, argc, argv)) return *status;
  return pf::run_mpi_program(argc, argv, "pf_golden_dump", [&](int size, int) {
    PF_REQUIRE(pf::ConfigError, size == 1, "pf_golden_dump runs on one rank, " << size << " were launched");
    pf::dump(checkpoint, output, overrides);
    return 0;
  });
}
