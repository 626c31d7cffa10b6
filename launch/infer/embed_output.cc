#include "launch/infer/embed_output.h"

#include "data/h5.h"
#include "runtime/check.h"

namespace pf {

OutputKind embeddings_kind() {
  return {"an embeddings file of performer-embed", [](const std::string& path) {
            return h5_root_has_attributes(path, {"checkpoint", "layer", "layer_name", "width"});
          }};
}

void EmbeddingWriter::add(const std::string& id, int64_t length, const std::vector<float>& mean,
                          const std::vector<float>& residues) {
  PF_REQUIRE(ValueError, static_cast<int64_t>(mean.size()) == width_,
             id << ": a mean embedding of " << mean.size() << " values for width " << width_);
  PF_REQUIRE(ValueError, !per_residue_ || static_cast<int64_t>(residues.size()) == length * width_,
             id << ": " << residues.size() << " per-residue values for " << length << " x " << width_);
  ids_.push_back(id);
  lengths_.push_back(length);
  mean_.insert(mean_.end(), mean.begin(), mean.end());
  if (per_residue_) {
    residues_.insert(residues_.end(), residues.begin(), residues.end());
    offsets_.push_back(offsets_.back() + length);
  }
}

void EmbeddingWriter::write(ReplaceableOutput& out, const std::string& checkpoint, int64_t layer,
                            const std::string& layer_name) const {
  auto write = [&](const std::string& tmp) {
    H5Id f = h5_create_file(tmp);
    h5_write_strings(f, "ids", ids_);
    h5_write_vector(f, "lengths", lengths_);
    h5_write_array(f, "mean", mean_.data(), {count(), width_});
    if (per_residue_) {
      H5Id g = h5_create_group(f, "residues");
      h5_write_vector(g, "offsets", offsets_);
      h5_write_array(g, "embeddings", residues_.data(), {offsets_.back(), width_});
      g.close();
    }
    h5_write_attr_string(f, "checkpoint", checkpoint);
    h5_write_attr_int64(f, "layer", layer);
    h5_write_attr_string(f, "layer_name", layer_name);
    h5_write_attr_int64(f, "width", width_);
    f.close();  // a last write that fails is an error, not a silent short file
  };
  out.write(write);
}

}  // namespace pf
