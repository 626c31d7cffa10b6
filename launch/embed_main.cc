// performer-embed: per-protein mean embeddings (and optionally per-residue
// rows) of FASTA / Swiss-Prot files under a checkpoint, into an HDF5 file
// (launch/infer/embed_output.h; readable with h5py).
//   [mpirun -np P] performer-embed --checkpoint FILE --output OUT.h5 [--layer final|K]
//       [--per-residue] [--pack TOKENS] [--map-unknown-to-x] [--set key=value ...] INPUT...
// Each protein is split over all P launched ranks (sequence parallel).
// --pack TOKENS embeds consecutive proteins together as packed samples of at
// most TOKENS tokens (each attends to itself only: the same embeddings).
// Exit status as performer-score: 2 for usage errors (options, inputs, a
// checkpoint this tool cannot use), 1 for malformed input and other errors.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

#include "data/replaceable_output.h"
#include "launch/core/mpi_program.h"
#include "launch/core/tool_cli.h"
#include "launch/infer/checkpoint_model.h"
#include "launch/infer/embed_output.h"
#include "launch/infer/embedding.h"
#include "launch/infer/sequence_input.h"
#include "runtime/clock.h"

int main(int argc, char** argv) {
  CLI::App app{"Per-protein (and per-residue) embeddings of proteins under a checkpoint, into HDF5"};
  std::string checkpoint, output, layer_text = "final";
  std::vector<std::string> inputs, overrides;
  bool per_residue = false, map_unknown = false;
  int64_t pack = 0;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (ckpt-*.h5)")->required();
  app.add_option("--output,-o", output, "HDF5 file to write")->required();
  app.add_option("--layer", layer_text,
                 "'final' (the final LayerNorm, what the output head reads) or K: 0 the embedding plus positions, "
                 "l the output of layer l")
      ->capture_default_str();
  app.add_flag("--per-residue", per_residue, "also write every residue's row");
  app.add_option("--pack", pack,
                 "embed consecutive proteins together in packed samples of at most this many tokens (0: one at a "
                 "time); the same embeddings, fewer forwards")
      ->capture_default_str();
  pf::add_map_unknown_option(app, map_unknown);
  pf::add_override_option(app, overrides);
  app.add_option("inputs", inputs, "FASTA / Swiss-Prot files, optionally .gz")->required();
  if (const auto status = pf::parse_tool_args(app, argc, argv)) return *status;

  return pf::run_mpi_program(argc, argv, "performer-embed", [&](int size, int rank) {
    PF_REQUIRE(pf::ConfigError, pack >= 0, "--pack must be >= 0 (0: one protein at a time), got " << pack);
    pf::check_sequence_inputs(inputs, "input");
    std::vector<std::string> read = inputs;
    read.push_back(checkpoint);
    std::optional<pf::ReplaceableOutput> target;  // on rank 0, the writer
    pf::check_on_rank0(MPI_COMM_WORLD, [&] { target.emplace("--output", output, pf::embeddings_kind(), read); });
    pf::CheckpointModel cm = pf::load_checkpoint_model(checkpoint, overrides, size);
    // Every protein is split over the sequence group (all ranks: sp = size).
    pf::Communicator& sp = cm.session->grid().sp_group();
    const int64_t L = cm.cfg.model.layers;
    const int64_t layer = pf::parse_embedding_layer(layer_text, L);
    const std::string layer_name = layer == L + 1 ? "final_layernorm"
                                   : layer == 0   ? "embedding"
                                                  : "layer" + std::to_string(layer);
    pf::EmbeddingWriter writer(cm.cfg.model.width, per_residue);
    pf::ReaderOptions ro;
    ro.map_unknown_to_x = map_unknown;
    pf::SequenceSource source(inputs, ro);
    pf::SequenceRecord rec;
    const double t0 = pf::seconds_now();
    std::vector<pf::SequenceRecord> pending;  // --pack: read, not embedded yet
    int64_t pending_tokens = 0, embedded = 0;
    auto flush = [&] {
      // What the watchdog names when another rank stalls this one.
      if (!pending.empty())
        cm.session->watchdog().set_phase(pf::records_phase("embedding", embedded, pending.size(), pending[0].id));
      embedded += static_cast<int64_t>(pending.size());
      if (pending.size() == 1) {
        const pf::SequenceEmbedding e =
            pf::embed_sequence(*cm.model, pending[0].tokens, layer, per_residue, cm.step, sp);
        if (rank == 0) writer.add(pending[0].id, static_cast<int64_t>(pending[0].tokens.size()), e.mean, e.residues);
      } else if (!pending.empty()) {
        std::vector<std::vector<uint8_t>> tokens;
        for (const pf::SequenceRecord& r : pending) tokens.push_back(r.tokens);
        const std::vector<pf::SequenceEmbedding> e =
            pf::embed_packed(*cm.model, tokens, layer, per_residue, cm.step, sp);
        if (rank == 0)
          for (size_t k = 0; k < pending.size(); ++k)
            writer.add(pending[k].id, static_cast<int64_t>(pending[k].tokens.size()), e[k].mean, e[k].residues);
      }
      pending.clear();
      pending_tokens = 0;
    };
    while (source.next(rec)) {
      const int64_t t = static_cast<int64_t>(rec.tokens.size()) + 1;  // its residues and <end>
      if (pack > 0 && pending_tokens + t > pack) flush();
      pending.push_back(rec);
      pending_tokens += t;
      if (pack == 0) flush();
    }
    flush();
    if (rank == 0) {
      writer.write(*target, checkpoint, layer, layer_name);
      std::fprintf(stderr, "performer-embed: %lld proteins, layer %s, width %lld -> %s (%d rank(s), %.1f s)\n",
                   static_cast<long long>(writer.count()), layer_name.c_str(),
                   static_cast<long long>(cm.cfg.model.width), output.c_str(), size, pf::seconds_now() - t0);
    }
    return 0;
  });
}
