// The HDF5 file of performer-embed, readable with h5py:
//   /ids                 vlen UTF-8 string [N]   first word of each header
//   /lengths             int64 [N]               residues n_i
//   /mean                float32 [N, C]          mean over the residues of the layer's rows
//   /residues/offsets    int64 [N + 1]           (--per-residue) protein i owns rows
//   /residues/embeddings float32 [sum n_i, C]    offsets[i] .. offsets[i + 1] - 1
//   attributes: checkpoint, layer (int64: 0 embedding plus positions, l the
//   output of layer l, layers + 1 the final LayerNorm), layer_name, width
// Written under a temporary name and renamed when complete (ReplaceableOutput).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/output_path.h"
#include "data/replaceable_output.h"

namespace pf {

// What performer-embed writes, for the output-path rule (data/output_path.h).
OutputKind embeddings_kind();

class EmbeddingWriter {
 public:
  EmbeddingWriter(int64_t width, bool per_residue) : width_(width), per_residue_(per_residue) {}
  // mean [C]; residues [n, C] when per_residue.
  void add(const std::string& id, int64_t length, const std::vector<float>& mean, const std::vector<float>& residues);
  // Into `out`, checked for embeddings_kind() before the work.
  void write(ReplaceableOutput& out, const std::string& checkpoint, int64_t layer, const std::string& layer_name) const;
  int64_t count() const { return static_cast<int64_t>(ids_.size()); }

 private:
  int64_t width_;
  bool per_residue_;
  std::vector<std::string> ids_;
  std::vector<int64_t> lengths_, offsets_{0};
  std::vector<float> mean_, residues_;
};

}  // namespace pf
