// performer-eval: loss, perplexity and accuracy of a checkpoint on a split of
// prepared HDF5 data, or on FASTA / Swiss-Prot files, with the same launch
// options as performer-train.
//   mpirun -np N performer-eval --checkpoint FILE [--split valid|test|train] [--set key=value]...
//   mpirun -np N performer-eval --checkpoint FILE --fasta FILE... [--map-unknown-to-x] [--set key=value]...
// The model configuration comes from the checkpoint; data and layout keys can
// be overridden (e.g. --set data.files=[\"other.h5\"] --set parallel.sp=2),
// and so can the keys that choose how attention is computed from the same
// parameters: --set model.attention=favor evaluates a softmax-trained model
// with FAVOR+, --set model.features=256 --set model.feature_draw=3 another
// number and draw of random features, --set model.attention=exp a softmax or
// FAVOR+ model with exp's projections at their start, FAVOR+'s draw
// (load_parameters in train_loop.h).
// --fasta prepares the files (data/prepare.h; plain or .gz, FASTA or Swiss-Prot
// by extension) into a temporary folder with every sequence in one split, as
// `performer-data prepare --val-fraction 0 --test-fraction 1` would, evaluates
// that split and removes the folder. Each rank prepares its own copy (the
// preparation is deterministic), so no folder needs to be shared between nodes.
// SIGINT or SIGTERM then stops the preparation or the evaluation at its next
// poll (every rank at the same batch), removes the folder and exits with
// 128 + the signal; a folder of a killed run (SIGKILL) is removed by the next
// --fasta run under the same temporary directory.
// In the packed and single data modes it also reports each protein length
// bucket (at most 1,024 residues, 1,025-8,192, longer): every position belongs
// to one protein there. A protein longer than a sample counts as the one crop
// its sample holds; such buckets are marked "(crops)" (performer-score scores
// whole proteins). In family mode it reports the context gain
// (launch/train/evaluation.h): every member scored after the relatives before
// it and alone, by the number of relatives before it.
// Usage errors (bad options, a negative --batches, --fasta with --split or with
// a missing file or unknown format, a parallel.sp that does not divide the
// launched ranks) exit with status 2 and name the option.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

#include "data/h5.h"
#include "data/prepare.h"
#include "data/schema.h"
#include "data/sequence_reader.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/mpi_program.h"
#include "launch/core/session.h"
#include "launch/core/stop_signal.h"
#include "launch/core/tool_cli.h"
#include "launch/core/train_config.h"
#include "launch/infer/sequence_input.h"
#include "launch/train/evaluation.h"
#include "launch/train/train_loop.h"
#include "model/params.h"

namespace {

// The largest parallel.sp that `ranks` launched ranks can run: a divisor of
// the rank count that divides the sample length (1 for exact softmax).
int64_t suggested_sp(const pf::TrainConfig& cfg, int ranks) {
  if (cfg.model.attention == pf::AttentionKind::Softmax) return 1;
  for (int64_t k = ranks; k > 1; --k)
    if (ranks % k == 0 && cfg.data.sample_length % k == 0) return k;
  return 1;
}

// Every rank prepares the files; no rank goes on (or aborts the job) before
// every rank has finished, so each removes its own folder on failure too.
std::unique_ptr<pf::TemporaryDataset> prepare_on_every_rank(const std::vector<std::string>& files,
                                                            bool map_unknown_to_x) {
  pf::PrepareOptions p;
  p.inputs = files;
  p.map_unknown_to_x = map_unknown_to_x;
  p.val_fraction = 0;
  p.test_fraction = 1;  // every sequence in /test
  p.stop_requested = [] { return pf::stop_requested(); };
  std::unique_ptr<pf::TemporaryDataset> data;
  std::exception_ptr error;
  try {
    data = std::make_unique<pf::TemporaryDataset>(p);
  } catch (...) {
    error = std::current_exception();
  }
  int failed = error ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (error) std::rethrow_exception(error);
  PF_REQUIRE(pf::DataError, failed == 0, "--fasta: another rank failed to prepare the files");
  return data;
}

std::string stats_text(const pf::EvalStats& e) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "loss %.4f | ppl %.3f | accuracy %.4f | %lld tokens", e.loss(), e.perplexity(),
                e.accuracy(), static_cast<long long>(e.tokens));
  return buf;
}

// Family mode: each pass's totals, then per number of relatives before a
// member the loss with them and alone, and the gain in nats per token.
void print_context_gain(const std::string& checkpoint, int64_t step, const std::string& what,
                        const pf::ContextGain& g) {
  std::printf("checkpoint %s (step %lld), %s, data.mode family\n", checkpoint.c_str(), static_cast<long long>(step),
              what.c_str());
  std::printf("  members after their relatives: %s\n", stats_text(g.context).c_str());
  std::printf("  members alone:                 %s\n", stats_text(g.alone).c_str());
  std::printf("  by relatives before a member (every token but the member's first residue):\n");
  std::printf("  %-10s %10s %10s %10s %10s %12s\n", "relatives", "tokens", "ppl_ctx", "ppl_alone", "gain_nats",
              "acc_ctx");
  for (int b = 0; b < pf::kRelativeBuckets; ++b) {
    const pf::EvalStats& c = g.context_by[static_cast<size_t>(b)];
    if (c.tokens == 0) {
      std::printf("  %-10s %10s\n", pf::relatives_bucket_name(b).c_str(), "none");
      continue;
    }
    std::printf("  %-10s %10lld %10.3f %10.3f %10.4f %12.4f\n", pf::relatives_bucket_name(b).c_str(),
                static_cast<long long>(c.tokens), c.perplexity(), g.alone_by[static_cast<size_t>(b)].perplexity(),
                g.gain(b), c.accuracy());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Evaluate a checkpoint on a split of prepared protein data, or on FASTA / Swiss-Prot files"};
  std::string checkpoint, split = "valid";
  std::vector<std::string> overrides, fasta;
  int64_t batches = 0;
  bool map_unknown = false;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (ckpt-*.h5)")->required()->check(CLI::ExistingFile);
  CLI::Option* split_option = app.add_option("--split", split, "split of the data files: train, valid, test or ood");
  app.add_option("--batches", batches, "evaluate only the first N batches (0: the whole split)");
  app.add_option("--fasta", fasta,
                 "evaluate on these FASTA / Swiss-Prot files (optionally .gz) instead of data.files: prepared into "
                 "a temporary folder with every sequence in one split, removed afterwards");
  pf::add_map_unknown_option(app, map_unknown, "of --fasta files ");
  app.add_option("--set", overrides, "override a key: section.key=value (repeatable)")->allow_extra_args(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the message (or the help)
    return code == 0 ? 0 : 2;
  }

  std::function<bool()> stop;  // with --fasta: SIGINT / SIGTERM / SIGUSR1, polled by the preparation and each batch
  if (!fasta.empty()) pf::install_stop_handlers();  // before MPI's threads
  const auto evaluate = [&](int size, int rank) {
    PF_REQUIRE(pf::ConfigError, batches >= 0, "--batches must be >= 0 (0: the whole split), got " << batches);
    PF_REQUIRE(pf::ConfigError, split == "train" || split == "valid" || split == "test" || split == pf::kOodSplitName,
               "--split must be train, valid, test or ood, got '" << split << "'");
    PF_REQUIRE(
        pf::ConfigError, fasta.empty() || split_option->count() == 0,
        "--fasta evaluates every sequence of its files (one split); it takes no --split (got --split " << split << ")");
    PF_REQUIRE(pf::ConfigError, !map_unknown || !fasta.empty(),
               "--map-unknown-to-x applies to the letters of --fasta files; a prepared split was checked when it "
               "was made");
    if (!fasta.empty()) pf::check_sequence_inputs(fasta, "--fasta");
    // Opened once: checked here, and the parameters read from it once the trainer exists.
    const pf::CheckpointFile file = [&] {
      try {
        return pf::open_checkpoint(checkpoint);
      } catch (const pf::Error& e) {
        throw pf::ConfigError(std::string("--checkpoint: not a usable checkpoint: ") + e.what());
      }
    }();
    pf::TrainConfig cfg = file.config(overrides);
    // Before anything is built from the stored configuration (its sizes are
    // only as sound as the file that declares them).
    pf::require_loadable_parameters(file, cfg);
    PF_REQUIRE(pf::ConfigError, size % cfg.parallel.sp == 0,
               "parallel.sp = " << cfg.parallel.sp << " (from the checkpoint or --set) does not divide the " << size
                                << " launched rank(s): evaluate with --set parallel.sp=" << suggested_sp(cfg, size)
                                << ", or launch a multiple of " << cfg.parallel.sp << " ranks");
    std::unique_ptr<pf::TemporaryDataset> prepared;
    std::string what = "split " + split;
    if (!fasta.empty()) {
      PF_REQUIRE(pf::ConfigError, cfg.data.mode != pf::SampleMode::Family,
                 checkpoint << " was trained with data.mode = \"family\", whose samples are families of a "
                               "cluster-split file; proteins read from --fasta have no families. Evaluate them "
                               "alone with --set data.mode=\"packed\", or score them given relatives with "
                               "performer-score --context");
      // A signal now stops the preparation or the evaluation at its next
      // poll, and the temporary folder goes with the unwinding (a killed
      // run's folder goes with the next --fasta run).
      stop = [] { return pf::stop_requested(); };
      prepared = prepare_on_every_rank(fasta, map_unknown);
      cfg.data.files = {prepared->path()};
      split = pf::kSplitNames[2];
      const pf::PrepareSummary& s = prepared->summary();
      what.clear();
      for (const std::string& f : fasta) what += (what.empty() ? "" : ", ") + f;
      what += " (" + std::to_string(s.splits[2].sequences) + " sequences)";
      if (rank == 0)
        std::fprintf(stderr, "performer-eval: prepared %s: %lld sequences read, %lld duplicates dropped\n",
                     what.c_str(), static_cast<long long>(s.sequences_read),
                     static_cast<long long>(s.duplicates_dropped));
    }
    cfg.data.valid_split = split;
    cfg.run.eval_batches = batches;
    cfg.checkpoint.resume.clear();
    pf::validate_layout(cfg, size);
    pf::Session session(cfg, MPI_COMM_WORLD);
    pf::check_memory_plan(cfg, session, false);  // sizes from the checkpoint or --set, before any allocation
    pf::Trainer trainer(cfg.model, cfg.optimizer, session.grid(), session.ctx(), cfg.parallel.attention);
    std::vector<std::string> fresh;
    const int64_t step = pf::load_parameters(file, cfg, trainer, &fresh);
    if (rank == 0 && !fresh.empty())
      std::fprintf(stderr, "performer-eval: not in %s, initialised: %s\n", checkpoint.c_str(),
                   pf::fresh_parameters_text(fresh).c_str());
    if (cfg.data.mode == pf::SampleMode::Family) {
      const pf::ContextGain g = pf::run_context_gain(cfg, session, trainer);
      if (rank == 0) print_context_gain(checkpoint, step, what, g);
      return 0;
    }
    std::vector<pf::EvalStats> by_length;
    std::vector<int64_t> cropped;
    const bool bucketed = cfg.data.mode != pf::SampleMode::Concat;
    const pf::EvalStats e =
        pf::run_validation(cfg, session, trainer, bucketed ? &by_length : nullptr, stop, bucketed ? &cropped : nullptr);
    if (rank == 0) {
      std::printf("checkpoint %s (step %lld), %s, data.mode %s: %s\n", checkpoint.c_str(), static_cast<long long>(step),
                  what.c_str(), pf::sample_mode_name(cfg.data.mode), stats_text(e).c_str());
      bool crops = false;  // a bucket that holds proteins longer than a sample
      for (size_t b = 0; b < by_length.size(); ++b) {
        crops = crops || cropped[b] > 0;
        std::printf("  proteins of %-18s %s%s\n", pf::length_bucket_name(static_cast<int>(b)).c_str(),
                    by_length[b].tokens ? stats_text(by_length[b]).c_str() : "none", cropped[b] > 0 ? " (crops)" : "");
      }
      if (crops)
        std::printf(
            "  (crops): a protein longer than data.sample_length = %lld tokens counts one crop of at most "
            "that many tokens, not the whole protein; performer-score scores whole proteins\n",
            static_cast<long long>(cfg.data.sample_length));
      if (!bucketed) std::printf("  (perplexity by protein length: evaluate with --set data.mode=packed or single)\n");
    }
    return 0;
  };
  return pf::run_mpi_program(argc, argv, "performer-eval", [&](int size, int rank) {
    try {
      return evaluate(size, rank);
    } catch (const pf::Error& e) {  // a stop: its temporary folder is removed by now
      if (!dynamic_cast<const pf::PrepareStopped*>(&e) && !dynamic_cast<const pf::EvalStopped*>(&e)) throw;
      const int sig = pf::stop_signal_number();
      if (rank == 0)
        std::fprintf(stderr, "performer-eval: stopped by signal %d (%s): %s; the prepared copy of --fasta removed\n",
                     sig, strsignal(sig), e.what());
      return 128 + sig;
    }
  });
}
