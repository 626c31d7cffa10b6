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
                                 bool per_residue, int64_t step, MPI_Comm comm) {
  PF_REQUIRE(ValueError, !residues.empty(), "cannot embed an empty sequence");
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int64_t n = static_cast<int64_t>(residues.size()), N = n + 1, C = model.config().width;
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
  sum_to_root(sum, comm);
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
    std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      const PositionBlock b = rank_block(N, r, size);
      counts[r] = static_cast<int>(std::max<int64_t>(0, std::min(b.end, n) - b.begin) * C);
      displs[r] = static_cast<int>(b.begin * C);
    }
    if (rank == 0) e.residues.resize(static_cast<size_t>(n * C));
    PF_MPI_CHECK(MPI_Gatherv(hidden.data(), static_cast<int>(rows * C), MPI_FLOAT, e.residues.data(), counts.data(),
                             displs.data(), MPI_FLOAT, 0, comm));
  }
  return e;
}

}  // namespace pf
