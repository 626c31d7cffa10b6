// performer-score: per-protein log-likelihoods of FASTA / Swiss-Prot files
// (plain or gzipped, read as performer-data reads them) under a checkpoint.
//   [mpirun -np P] performer-score --checkpoint FILE [--format tsv|jsonl] [--output FILE]
//       [--per-residue FILE.h5] [--first-residue auto|scored|context] [--pll-batch-tokens N]
//       [--pack TOKENS] [--map-unknown-to-x] [--set key=value ...] INPUT...
// Causal checkpoints give the exact log-likelihood, masked ones the
// pseudo-log-likelihood (each residue masked in turn); the `measure` column
// says which (launch/infer/scoring.h, formats in launch/infer/score_output.h).
// Every protein is split over all P launched ranks (sequence parallel, as
// in training), so one protein may be longer than one rank could hold.
// --pack TOKENS scores consecutive proteins together, as packed samples of at
// most TOKENS tokens (each protein attends to itself only: the same scores as
// one at a time, in fewer and fuller forwards); a longer protein goes alone.
// --context FILE... scores every query given those proteins (its homologs)
// before it, as a data.mode = "family" model reads a family, and alone
// (launch/infer/context_scoring.h): the linear kernels run the context once
// and start every query from its state (--context-mode cached, the default);
// one-pass runs context + query together for every query (exact softmax
// always does). Causal checkpoints only.
// Exit status: 0 done; 2 a usage error (bad option, missing input or unknown
// extension, a checkpoint this tool cannot use: another vocabulary, another
// model layout, not a checkpoint); 1 any other error, e.g. malformed input
// (an unknown letter, an empty file: the file and line are named).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "data/paths.h"
#include "data/replaceable_output.h"
#include "launch/core/model_rules.h"
#include "launch/core/mpi_program.h"
#include "launch/core/output_file.h"
#include "launch/core/tool_cli.h"
#include "launch/infer/checkpoint_model.h"
#include "launch/infer/context_scoring.h"
#include "launch/infer/score_output.h"
#include "launch/infer/scoring.h"
#include "launch/infer/sequence_input.h"
#include "runtime/clock.h"

int main(int argc, char** argv) {
  CLI::App app{"Log-likelihood (causal) or pseudo-log-likelihood (masked) of each protein under a checkpoint"};
  std::string checkpoint, format = "tsv", output, per_residue, first_residue = "auto";
  std::vector<std::string> inputs, overrides;
  int64_t pll_batch_tokens = 16384, pack = 0;
  bool map_unknown = false;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (ckpt-*.h5)")->required();
  app.add_option("--format", format, "tsv or jsonl")->capture_default_str();
  app.add_option("--output,-o", output, "results file (default: stdout)");
  app.add_option("--per-residue", per_residue, "also write per-residue log-probabilities to this HDF5 file");
  app.add_option("--first-residue", first_residue,
                 "causal models: 'scored' (input starts with <end>, every residue is predicted), 'context' "
                 "(the first residue is context only, as a data.mode=single or packed sample) or 'auto' (scored "
                 "for checkpoints trained with data.mode=concat, context otherwise)")
      ->capture_default_str();
  app.add_option("--pll-batch-tokens", pll_batch_tokens,
                 "masked models: tokens per rank in one forward (masked copies of a protein share a forward)")
      ->capture_default_str();
  app.add_option("--pack", pack,
                 "score consecutive proteins together in packed samples of at most this many tokens (0: one at a "
                 "time); the same scores, fewer forwards")
      ->capture_default_str();
  std::vector<std::string> context;
  std::string context_mode = "auto";
  CLI::Option* context_option =
      app.add_option("--context", context,
                     "FASTA / Swiss-Prot file of homologs (repeatable): score each query given them (before it, as a "
                     "family) and alone")
          ->allow_extra_args(false);
  app.add_option("--context-mode", context_mode,
                 "with --context: 'cached' (run the context once, start every query from its state; linear "
                 "kernels and local windows), 'one-pass' (context + query together for each query) or 'auto' "
                 "(cached unless model.attention = softmax without a window)")
      ->capture_default_str()
      ->needs(context_option);
  pf::add_map_unknown_option(app, map_unknown);
  pf::add_override_option(app, overrides);
  app.add_option("inputs", inputs, "FASTA / Swiss-Prot files, optionally .gz")->required();
  if (const auto status = pf::parse_tool_args(app, argc, argv)) return *status;

  return pf::run_mpi_program(argc, argv, "performer-score", [&](int size, int rank) {
    const pf::ScoreFormat fmt = pf::parse_score_format(format);
    pf::ScoreOptions so;
    if (first_residue != "auto") so.first_residue = pf::parse_first_residue(first_residue);
    so.pll_batch_tokens = pll_batch_tokens;
    PF_REQUIRE(pf::ConfigError, pll_batch_tokens >= 1, "--pll-batch-tokens must be >= 1, got " << pll_batch_tokens);
    PF_REQUIRE(pf::ConfigError, pack >= 0, "--pack must be >= 0 (0: one protein at a time), got " << pack);
    pf::check_sequence_inputs(inputs, "input");
    if (!context.empty()) pf::check_sequence_inputs(context, "--context");
    PF_REQUIRE(pf::ConfigError, context_mode == "auto" || context_mode == "cached" || context_mode == "one-pass",
               "--context-mode must be auto, cached or one-pass, got '" << context_mode << "'");
    PF_REQUIRE(pf::ConfigError, context.empty() || pack == 0,
               "--pack scores proteins alone in shared samples; it cannot be combined with --context");
    std::vector<std::string> read = inputs;
    read.insert(read.end(), context.begin(), context.end());
    read.push_back(checkpoint);
    std::optional<pf::ReplaceableOutput> table, residue_file;  // on rank 0, the writer
    pf::check_on_rank0(MPI_COMM_WORLD, [&] {
      table.emplace(pf::ReplaceableOutput::file_or_stdout("--output", output, pf::score_table_kind(), read));
      PF_REQUIRE(
          pf::ConfigError, output.empty() || per_residue.empty() || !pf::same_file(output, per_residue),
          "--per-residue '" << per_residue << "' and --output '" << output << "' are the same file: give each its own");
      if (!per_residue.empty()) residue_file.emplace("--per-residue", per_residue, pf::per_residue_kind(), read);
    });
    pf::CheckpointModel cm = pf::load_checkpoint_model(checkpoint, overrides, size);
    // Every protein is split over the sequence group (all ranks: sp = size);
    // its collectives run on the communicator, under the session's watchdog.
    pf::Communicator& sp = cm.session->grid().sp_group();
    pf::Watchdog& watchdog = cm.session->watchdog();
    so.step = cm.step;  // the random projections the checkpoint was trained with, as performer-eval
    PF_REQUIRE(pf::ConfigError, cm.cfg.model.causal() || first_residue == "auto",
               "--first-residue " << first_residue << " applies to causal checkpoints; " << checkpoint
                                  << " is a masked-LM one, whose pseudo-log-likelihood scores every residue");
    if (first_residue == "auto") {
      // A model trained packed or single never predicted a protein's first residue.
      so.first_residue =
          cm.cfg.data.mode == pf::SampleMode::Concat ? pf::FirstResidue::Scored : pf::FirstResidue::Context;
      first_residue = so.first_residue == pf::FirstResidue::Scored ? "scored" : "context";
    }
    const std::string measure = pf::score_measure(cm.cfg.model);
    std::unique_ptr<pf::OutputFile> out;
    if (rank == 0) out = std::make_unique<pf::OutputFile>(std::move(*table));
    pf::PerResidueWriter residues;
    pf::ReaderOptions ro;
    ro.map_unknown_to_x = map_unknown;
    pf::SequenceSource source(inputs, ro);
    pf::SequenceRecord rec;
    int64_t proteins = 0, scored = 0;
    double total = 0;
    const double t0 = pf::seconds_now();
    // Proteins read but not scored yet (--pack), and their tokens.
    std::vector<pf::SequenceRecord> pending;
    int64_t pending_tokens = 0;
    auto emit = [&](const pf::SequenceRecord& r, const pf::SequenceScore& s) {
      ++proteins;
      if (rank != 0) return;
      const int64_t n = static_cast<int64_t>(r.tokens.size());
      if (proteins == 1) out->write(pf::score_header(fmt));  // after the first record read well
      out->write(pf::format_score_row(fmt, pf::ScoreRow{r.id, n, measure, s.scored, s.total, s.perplexity()}));
      if (!per_residue.empty()) residues.add(r.id, n, s.logprob, s.top);
      scored += s.scored;
      total += s.total;
    };
    auto flush = [&] {
      if (!pending.empty()) watchdog.set_phase(pf::records_phase("scoring", proteins, pending.size(), pending[0].id));
      if (pending.size() == 1) {
        emit(pending[0], pf::score_sequence(*cm.model, pending[0].tokens, so, sp));
      } else if (!pending.empty()) {
        std::vector<std::vector<uint8_t>> tokens;
        for (const pf::SequenceRecord& r : pending) tokens.push_back(r.tokens);
        const std::vector<pf::SequenceScore> s = pf::score_packed(*cm.model, tokens, so, sp);
        for (size_t k = 0; k < pending.size(); ++k) emit(pending[k], s[k]);
      }
      pending.clear();
      pending_tokens = 0;
    };
    if (!context.empty()) {
      PF_REQUIRE(pf::ConfigError, context_mode != "cached" || !pf::attends_to_every_key(cm.cfg.model),
                 "--context-mode cached needs a linear kernel or a local window: model.attention = softmax keeps "
                 "every context key (use one-pass, or --set model.attention=favor)");
      std::vector<std::vector<uint8_t>> homologs, queries;
      for (const pf::SequenceRecord& r : pf::read_all_sequences(context, ro)) homologs.push_back(r.tokens);
      const std::vector<pf::SequenceRecord> records = pf::read_all_sequences(inputs, ro);
      for (const pf::SequenceRecord& r : records) queries.push_back(r.tokens);
      const double c0 = pf::seconds_now();
      watchdog.set_phase("the scoring of the context");
      pf::ContextScorer scorer(*cm.model, cm.session->ctx(), homologs, so, sp, context_mode != "one-pass");
      const double c1 = pf::seconds_now();
      watchdog.set_phase("the scoring of the queries given the context");
      const std::vector<pf::SequenceScore> given = scorer.score(queries);
      const double c2 = pf::seconds_now();
      for (size_t k = 0; k < records.size(); ++k) {
        watchdog.set_phase(pf::records_phase("scoring", static_cast<int64_t>(k), 1, records[k].id) + " alone");
        const pf::SequenceScore alone = pf::score_sequence(*cm.model, queries[k], so, sp);
        ++proteins;
        if (rank != 0) continue;
        const pf::SequenceScore& g = given[k];
        const int64_t n = static_cast<int64_t>(queries[k].size());
        double common = 0;  // log P given the context over the terms scored alone too
        for (size_t i = 0; i < alone.logprob.size(); ++i)
          if (!std::isnan(alone.logprob[i])) common += g.logprob[i];
        pf::ScoreRow row{records[k].id, n, "log_likelihood_given_context", g.scored, g.total, g.perplexity()};
        row.with_context = true;
        row.alone_scored = alone.scored;
        row.alone_log_likelihood = alone.total;
        row.gain_per_token = alone.scored ? (common - alone.total) / static_cast<double>(alone.scored) : 0.0;
        if (proteins == 1) out->write(pf::score_header(fmt, true));
        out->write(pf::format_score_row(fmt, row));
        if (!per_residue.empty()) residues.add(records[k].id, n, g.logprob, g.top);
        scored += g.scored;
        total += g.total;
      }
      if (rank == 0)
        std::fprintf(stderr,
                     "performer-score: context of %zu proteins (%lld tokens), %s: %lld context tokens run; "
                     "context %.3f s, %zu queries given it %.3f s (%.4f s per query)\n",
                     homologs.size(), static_cast<long long>(scorer.context_tokens()),
                     scorer.cached() ? "cached state" : "one pass per query",
                     static_cast<long long>(scorer.context_tokens_run()), c1 - c0, queries.size(), c2 - c1,
                     queries.empty() ? 0.0 : (c2 - c1) / static_cast<double>(queries.size()));
    }
    while (context.empty() && source.next(rec)) {
      if (pack == 0) {
        watchdog.set_phase(pf::records_phase("scoring", proteins, 1, rec.id));
        emit(rec, pf::score_sequence(*cm.model, rec.tokens, so, sp));
        continue;
      }
      const int64_t t = pf::packed_score_tokens(cm.cfg.model, static_cast<int64_t>(rec.tokens.size()), so);
      if (pending_tokens + t > pack) flush();
      pending.push_back(rec);
      pending_tokens += t;
    }
    flush();
    if (rank == 0) {
      // Both files or neither: each is written in full under a temporary
      // name, then both are renamed; a failure before the renames removes
      // both temporaries and leaves any earlier outputs as they were.
      if (residue_file)
        residues.write_file(residue_file->temporary_path(), context.empty() ? measure : "log_likelihood_given_context",
                            checkpoint,
                            cm.cfg.model.causal() ? (context.empty() ? first_residue : "given_context") : "");
      out->finish();
      if (residue_file) residue_file->commit();
      out->commit();
      std::fprintf(stderr,
                   "performer-score: %lld proteins, %s %.4f per scored token (%lld tokens, perplexity %.3f), "
                   "%d rank(s), %.1f s\n",
                   static_cast<long long>(proteins), context.empty() ? measure.c_str() : "log_likelihood_given_context",
                   scored ? total / scored : 0.0, static_cast<long long>(scored),
                   scored ? std::exp(-total / scored) : 0.0, size, pf::seconds_now() - t0);
    }
    return 0;
  });
}
