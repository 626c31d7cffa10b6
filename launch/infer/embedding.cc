#include "launch/infer/embedding.h"

#include <algorithm>
#include <limits>

#include "data/vocab.h"
#include "launch/infer/sequence_split.h"
#include "runtime/check.h"

namespace pf {

int64_t parse_embedding_layer(const std::string& text, int64_t layers) {
  if (text == "final") return layers + 1;
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  PF_REQUIRE(ConfigError, used == text.size() && v >= 0 && v <= layers + 1,
             "--layer must be 'final' or an integer in [0, " << layers + 1
                                                             << "] (0: embedding plus positions, l: "
                                                                "output of layer l, "
                                                             << layers + 1 << ": final LayerNorm), got '" << text
                                                             << "'");
  return v;
}

SequenceEmbedding embed_sequence(PerformerModel& model, const std::vector<uint8_t>& residues, int64_t layer,
                                 bool per_residue, int64_t step, Communicator& comm) {
  PF_REQUIRE(ValueError, !residues.empty(), "cannot embed an empty sequence");
  const int rank = comm.rank(), size = comm.size();
  MemoryTracker& tracker = model_tracker(model);
  const int64_t n = static_cast<int64_t>(residues.size()), N = n + 1, C = model.config().width;
  // Too short to split over the ranks of a windowed model: packed with a
  // filler (embed_packed), which gives the same embedding.
  if (N < packed_row_minimum(model.config(), size) && model.config().window > 0)
    return std::move(embed_packed(model, {residues}, layer, per_residue, step, comm)[0]);
  const PositionBlock blk = rank_block(N, rank, size);
  ModelInput in;
  in.batch = 1;
  in.n = blk.size();
  in.offset = blk.begin;
  for (int64_t i = blk.begin; i < blk.end; ++i) in.inputs.push_back(i < n ? residues[i] : Vocab::kEnd);
  in.targets.assign(in.inputs.size(), -1);
  std::vector<float> hidden;
  model.hidden_states(in, step, layer, &hidden);

  // Residue rows of this block: [blk.begin, min(blk.end, n)).
  const int64_t rows = std::max<int64_t>(0, std::min(blk.end, n) - blk.begin);
  std::vector<double> sum(static_cast<size_t>(C), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < C; ++c) sum[c] += hidden[i * C + c];
  sum_to_root(sum, comm, tracker);
  SequenceEmbedding e;
  if (rank == 0) {
    e.mean.resize(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) e.mean[c] = static_cast<float>(sum[c] / static_cast<double>(n));
  }
  if (per_residue) {
    // MPI counts are int.
    PF_REQUIRE(ValueError, n * C <= std::numeric_limits<int>::max(),
               "per-residue embeddings of " << n << " residues x " << C
                                            << " exceed one MPI message; embed without "
                                               "--per-residue");
    // Each rank's residue rows, in rank order: the blocks are consecutive.
    std::vector<int64_t> counts(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      const PositionBlock b = rank_block(N, r, size);
      counts[r] = std::max<int64_t>(0, std::min(b.end, n) - b.begin) * C;
    }
    if (rank == 0) e.residues.resize(static_cast<size_t>(n * C));
    gatherv_host_values(comm, hidden.data(), rows * C, e.residues.data(), counts, DType::f32, 0, tracker);
  }
  return e;
}

std::vector<SequenceEmbedding> embed_packed(PerformerModel& model, const std::vector<std::vector<uint8_t>>& proteins,
                                            int64_t layer, bool per_residue, int64_t step, Communicator& comm) {
  const int rank = comm.rank(), size = comm.size();
  MemoryTracker& tracker = model_tracker(model);
  const int64_t C = model.config().width, K = static_cast<int64_t>(proteins.size());
  PackedRow row;
  for (const std::vector<uint8_t>& r : proteins) {
    PF_REQUIRE(ValueError, !r.empty(), "cannot embed an empty sequence");
    std::vector<int32_t> t(r.begin(), r.end());
    t.push_back(Vocab::kEnd);
    row.add(t);
  }
  // Fewer positions than a split over the ranks needs (packed_row_minimum):
  // a filler sequence after the proteins (K marks it), whose rows are dropped.
  const int64_t filler = packed_row_minimum(model.config(), size) - row.size();
  if (filler > 0) row.add(std::vector<int32_t>(static_cast<size_t>(filler), Vocab::kPad));
  const int64_t N = row.size();
  const PositionBlock blk = rank_block(N, rank, size);
  ModelInput in;
  in.batch = 1;
  in.n = blk.size();
  in.offset = blk.begin;
  in.inputs.assign(row.tokens.begin() + blk.begin, row.tokens.begin() + blk.end);
  in.targets.assign(in.inputs.size(), -1);
  in.packed.samples.push_back(row.pieces(blk));
  std::vector<float> hidden;
  model.hidden_states(in, step, layer, &hidden);

  // Sums over each protein's residue rows (not its <end>), then the means on rank 0.
  auto is_residue = [&](int64_t x) { return row.sequence_at(x) < K && x + 1 < row.start(row.sequence_at(x) + 1); };
  std::vector<double> sum(static_cast<size_t>(K * C), 0.0);
  for (int64_t x = blk.begin; x < blk.end; ++x) {
    if (!is_residue(x)) continue;
    const int64_t k = row.sequence_at(x);
    for (int64_t c = 0; c < C; ++c) sum[static_cast<size_t>(k * C + c)] += hidden[(x - blk.begin) * C + c];
  }
  sum_to_root(sum, comm, tracker);
  std::vector<SequenceEmbedding> out(static_cast<size_t>(K));
  if (rank == 0)
    for (int64_t k = 0; k < K; ++k) {
      const double n = static_cast<double>(proteins[static_cast<size_t>(k)].size());
      out[static_cast<size_t>(k)].mean.resize(static_cast<size_t>(C));
      for (int64_t c = 0; c < C; ++c)
        out[static_cast<size_t>(k)].mean[static_cast<size_t>(c)] = static_cast<float>(sum[k * C + c] / n);
    }
  if (per_residue) {
    PF_REQUIRE(
        ValueError, N * C <= std::numeric_limits<int>::max(),
        "per-residue embeddings of " << N << " packed tokens x " << C << " exceed one MPI message; pack fewer tokens");
    std::vector<int64_t> counts(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) counts[r] = rank_block(N, r, size).size() * C;
    std::vector<float> all(rank == 0 ? static_cast<size_t>(N * C) : 0);
    gatherv_host_values(comm, hidden.data(), blk.size() * C, all.data(), counts, DType::f32, 0, tracker);
    if (rank == 0)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t first = row.start(k), n = static_cast<int64_t>(proteins[k].size());
        out[static_cast<size_t>(k)].residues.assign(all.begin() + first * C, all.begin() + (first + n) * C);
      }
  }
  return out;
}

}  // namespace pf
