// performer-generate: proteins sampled from a causal checkpoint, run as a
// recurrent network (model/recurrent.h: the attention state of every layer
// and head carried token by token, O(1) time and memory per token).
//   [mpirun -np P] performer-generate --checkpoint FILE [--num N] [--max-length N]
//       [--temperature T] [--top-k K] [--top-p P] [--seed S] [--prompt FILE]
//       [--output OUT.fasta] [--id-prefix TEXT] [--set key=value ...]
// Each protein starts from <end> (then the prompt's residues, when given:
// every record of --prompt gets --num continuations) and stops when <end> is
// drawn or after --max-length generated residues. A checkpoint trained with
// data.mode = "packed" or "single" never predicted a protein's first residue:
// its proteins start at position 0 with the prompt, by default the
// initiator methionine M (--prompt gives others). Protein i's draws are keyed
// by (seed, i) with a counter-based generator, so the output does not depend
// on the rank count; with P ranks, rank r generates proteins r, r + P, ...
// and rank 0 writes them in order. Output: FASTA, 60 residues a line, header
//   >ID length=N stop=end|max_length prompt=ID|none prompt_length=K seed=S
// Exit status: 2 for usage errors (options, a masked-LM or softmax checkpoint,
// another vocabulary or model layout), 1 for malformed prompts and other errors.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>

#include "data/replaceable_output.h"
#include "data/vocab.h"
#include "launch/core/model_rules.h"
#include "launch/core/mpi_program.h"
#include "launch/core/output_file.h"
#include "launch/core/tool_cli.h"
#include "launch/infer/checkpoint_model.h"
#include "launch/infer/generation.h"
#include "launch/infer/sequence_input.h"
#include "runtime/clock.h"
#include "runtime/comm.h"

namespace {

std::string fasta_record(const std::string& header, const std::string& residues) {
  std::string s = ">" + header + "\n";
  for (size_t i = 0; i < residues.size(); i += 60) s += residues.substr(i, 60) + "\n";
  return s;
}

// Proteins each rank generates between two gathers on rank 0: enough that
// the ranks do not wait for each other after every protein, few enough that
// rank 0's wait for the slowest rank (a watched wait, parallel.timeout_s)
// spans a few proteins, never the whole run.
constexpr int64_t kGatherEvery = 16;

// Rank 0 gets every rank's texts (the same number on every rank, "" where a
// rank has no record), over the world communicator: their lengths, then
// their bytes. texts[r][j]: rank r's j-th.
std::vector<std::vector<std::string>> gather_texts(pf::Communicator& world, pf::MemoryTracker& tracker,
                                                   const std::vector<std::string>& mine) {
  const int ranks = world.size();
  const bool root = world.rank() == 0;
  const int64_t per_rank = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths, mine_lengths;
  std::string bytes;
  for (const std::string& t : mine) {
    mine_lengths.push_back(static_cast<int64_t>(t.size()));
    bytes += t;
  }
  if (root) lengths.resize(static_cast<size_t>(ranks * per_rank));
  pf::gatherv_host_values(world, mine_lengths.data(), per_rank, lengths.data(),
                          std::vector<int64_t>(static_cast<size_t>(ranks), per_rank), pf::DType::i64, 0, tracker);
  std::vector<int64_t> counts(root ? static_cast<size_t>(ranks) : 0, 0);
  for (size_t k = 0; k < lengths.size(); ++k) counts[k / static_cast<size_t>(per_rank)] += lengths[k];
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  std::string all(static_cast<size_t>(total), '\0');
  pf::gatherv_host_values(world, bytes.data(), static_cast<int64_t>(bytes.size()), all.data(), counts, pf::DType::u8, 0,
                          tracker);
  std::vector<std::vector<std::string>> texts(root ? static_cast<size_t>(ranks) : 0);
  size_t at = 0;
  for (size_t k = 0; k < lengths.size(); ++k) {
    texts[k / static_cast<size_t>(per_rank)].push_back(all.substr(at, static_cast<size_t>(lengths[k])));
    at += static_cast<size_t>(lengths[k]);
  }
  return texts;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sample proteins from a causal checkpoint, token by token with the recurrent form"};
  std::string checkpoint, output, id_prefix = "generated";
  std::vector<std::string> prompts, overrides;
  int64_t num = 1;
  bool map_unknown = false;
  pf::GenerateOptions go;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (ckpt-*.h5) of a causal model")->required();
  app.add_option("--num,-n", num, "proteins to generate (per prompt record)")->capture_default_str();
  app.add_option("--max-length", go.max_length, "most residues generated per protein (the prompt not counted)")
      ->capture_default_str();
  app.add_option("--temperature", go.sampling.temperature, "softmax temperature; 0 is greedy")->capture_default_str();
  app.add_option("--top-k", go.sampling.top_k, "draw from the K most likely tokens (0: all)")->capture_default_str();
  app.add_option("--top-p", go.sampling.top_p, "draw from the smallest set of tokens with this mass (1: all)")
      ->capture_default_str();
  app.add_option("--seed", go.seed, "seed of the draws: the same seed gives the same proteins")->capture_default_str();
  app.add_option("--prompt", prompts, "FASTA / Swiss-Prot file(s) whose records start the proteins");
  pf::add_map_unknown_option(app, map_unknown, "of prompts ");
  app.add_option("--output,-o", output, "FASTA file to write (default: stdout)");
  app.add_option("--id-prefix", id_prefix, "identifiers are PREFIX-<index>")->capture_default_str();
  pf::add_override_option(app, overrides);
  if (const auto status = pf::parse_tool_args(app, argc, argv)) return *status;

  return pf::run_mpi_program(argc, argv, "performer-generate", [&](int size, int rank) {
    PF_REQUIRE(pf::ConfigError, num >= 1, "--num must be >= 1, got " << num);
    PF_REQUIRE(pf::ConfigError, go.max_length >= 1,
               "--max-length must be >= 1 (a protein of no residues is no FASTA record), got " << go.max_length);
    pf::validate_sampling(go.sampling);
    // The prefix starts each FASTA header's identifier, which ends at the
    // first space: a space, a line break or a control character would split
    // the record or give every protein the same identifier.
    PF_REQUIRE(pf::ConfigError,
               !id_prefix.empty() && std::none_of(id_prefix.begin(), id_prefix.end(),
                                                  [](unsigned char c) { return c <= ' ' || c == 0x7f; }),
               "--id-prefix must be a non-empty word without spaces or control characters, got '" << id_prefix
                                                                                                 << "'");
    std::vector<std::string> read = prompts;
    read.push_back(checkpoint);
    std::optional<pf::ReplaceableOutput> target;  // on rank 0, the writer
    pf::check_on_rank0(MPI_COMM_WORLD, [&] {
      target.emplace(pf::ReplaceableOutput::file_or_stdout("--output", output, pf::generated_fasta_kind(), read));
    });
    {
      const pf::TrainConfig stored = pf::read_checkpoint_config(checkpoint, overrides);
      PF_REQUIRE(pf::ConfigError, stored.model.causal(),
                 checkpoint << ": a masked-LM checkpoint (model.objective = \""
                            << pf::objective_name(stored.model.objective)
                            << "\") cannot generate: its attention is bidirectional, so it has no next-token "
                               "distribution (score it with performer-score, which gives pseudo-log-likelihoods)");
      PF_REQUIRE(pf::ConfigError, !pf::attends_to_every_key(stored.model),
                 checkpoint << ": model.attention = softmax without a window (model.window = 0) has no recurrent "
                               "state of bounded size: generate with random features, --set "
                               "model.attention=favor");
    }
    std::vector<pf::SequenceRecord> prompt_records;
    if (!prompts.empty()) {
      pf::check_sequence_inputs(prompts, "--prompt");
      pf::ReaderOptions ro;
      ro.map_unknown_to_x = map_unknown;
      prompt_records = pf::read_all_sequences(prompts, ro);
    }
    pf::CheckpointModel cm = pf::load_checkpoint_model(checkpoint, overrides, 1);
    go.leading_end = cm.cfg.data.mode == pf::SampleMode::Concat;
    if (prompt_records.empty()) {
      prompt_records.emplace_back();  // one prompt: none, or M where the model starts at a residue
      if (!go.leading_end) {
        prompt_records.back().id = "M";
        prompt_records.back().tokens = {pf::Vocab::encode('M')};
      }
    }
    pf::RecurrentPerformer rec(*cm.model, cm.session->ctx(), 1, cm.step);
    const int64_t records = static_cast<int64_t>(prompt_records.size());
    PF_REQUIRE(pf::ConfigError, num <= (int64_t{1} << 40) / records,
               "--num " << num << " for " << records << " prompt record(s) asks for more than 2^40 proteins");
    const int64_t total = num * records;
    std::unique_ptr<pf::OutputFile> out;
    if (rank == 0) out = std::make_unique<pf::OutputFile>(std::move(*target));
    const double t0 = pf::seconds_now();
    int64_t tokens = 0;
    // Proteins [first, first + size * kGatherEvery) at a time: rank r makes
    // first + r, first + r + size, ...; rank 0 then gathers them (over the
    // world communicator, under the session's watchdog) and writes every
    // record in index order.
    pf::Communicator& world = cm.session->grid().world();
    pf::MemoryTracker& tracker = cm.session->tracker();
    for (int64_t first = 0; first < total; first += size * kGatherEvery) {
      const int64_t last = std::min(total, first + size * kGatherEvery);
      cm.session->watchdog().set_phase("the generation of proteins " + std::to_string(first) + " to " +
                                       std::to_string(last - 1));
      std::vector<std::string> mine;
      for (int64_t i = first + rank; i < last; i += size) {
        const pf::SequenceRecord& prompt = prompt_records[static_cast<size_t>(i / num)];
        const pf::GeneratedProtein g = pf::generate_protein(rec, prompt.tokens, go, static_cast<uint64_t>(i));
        tokens += static_cast<int64_t>(g.residues.size()) - g.prompt_length + (g.ended ? 1 : 0);
        std::ostringstream h;
        h << id_prefix << "-" << i << " length=" << g.residues.size() << " stop=" << (g.ended ? "end" : "max_length")
          << " prompt=" << (prompt.id.empty() ? "none" : prompt.id) << " prompt_length=" << g.prompt_length
          << " seed=" << go.seed;
        mine.push_back(fasta_record(h.str(), g.residues));
      }
      mine.resize(static_cast<size_t>(kGatherEvery));
      const std::vector<std::vector<std::string>> texts = gather_texts(world, tracker, mine);
      if (rank == 0)
        for (int64_t i = first; i < last; ++i)
          out->write(texts[static_cast<size_t>(i % size)][static_cast<size_t>((i - first) / size)]);
    }
    int64_t all_tokens = tokens;
    pf::reduce_host_values(world, &all_tokens, 1, pf::DType::i64, pf::ReduceOp::Sum, 0, tracker);
    if (rank == 0) {
      out->commit();
      std::fprintf(stderr, "performer-generate: %lld proteins, %lld sampled tokens, %.1f s on %d rank(s)\n",
                   static_cast<long long>(total), static_cast<long long>(all_tokens), pf::seconds_now() - t0, size);
    }
    return 0;
  });
}
