// performer-eval: loss, perplexity and accuracy of a checkpoint on a split of
// prepared HDF5 data, with the same launch options as performer-train.
//   mpirun -np N performer-eval --checkpoint FILE [--split valid|test|train] [--set key=value ...]
// The model configuration comes from the checkpoint; data and layout keys can
// be overridden (e.g. --set data.files=[\"other.h5\"] --set parallel.sp=2),
// and so can the keys that choose how attention is computed from the same
// parameters: --set model.attention=favor evaluates a softmax-trained model
// with FAVOR+, --set model.features=256 --set model.feature_draw=3 another
// number and draw of random features (load_parameters in train_loop.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "data/h5.h"
#include "launch/train/checkpoint.h"
#include "launch/train/mpi_program.h"
#include "launch/train/session.h"
#include "launch/train/train_config.h"
#include "launch/train/train_loop.h"

int main(int argc, char** argv) {
  CLI::App app{"Evaluate a checkpoint on a split of prepared protein data"};
  std::string checkpoint, split = "valid";
  std::vector<std::string> overrides;
  int64_t batches = 0;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (ckpt-*.h5)")->required()->check(CLI::ExistingFile);
  app.add_option("--split", split, "split of the data files: train, valid or test (or any group name)");
  app.add_option("--batches", batches, "evaluate only the first N batches (0: the whole split)");
  app.add_option("--set", overrides, "override a key: section.key=value (repeatable)");
  CLI11_PARSE(app, argc, argv);

  return pf::run_mpi_program(argc, argv, "performer-eval", [&](int size, int rank) {
    std::string text;
    {
      pf::H5Id f = pf::h5_open_file(checkpoint);
      text = pf::h5_read_attr_string(f, "config");
    }
    pf::TrainConfig cfg = pf::parse_train_config_text(text, checkpoint, overrides);
    cfg.data.valid_split = split;
    cfg.run.eval_batches = batches;
    cfg.checkpoint.resume.clear();
    pf::validate_layout(cfg, size);
    pf::Session session(cfg, MPI_COMM_WORLD);
    pf::Trainer trainer(cfg.model, cfg.optimizer, session.grid(), session.ctx(), cfg.parallel.attention);
    const int64_t step = pf::load_parameters(checkpoint, cfg, trainer);
    const pf::EvalStats e = pf::run_validation(cfg, session, trainer);
    if (rank == 0) {
      std::printf("checkpoint %s (step %lld), split %s: loss %.4f | ppl %.3f | accuracy %.4f | %lld tokens\n",
                  checkpoint.c_str(), static_cast<long long>(step), split.c_str(), e.loss(),
                  e.perplexity(), e.accuracy(), static_cast<long long>(e.tokens));
    }
    return 0;
  });
}
