// The loader tests' clustered data: QUERY.fasta.gz split by sequence hash
// (10 % valid, 10 % test), then given synthetic clusters of 1, 2, 3, 5, 8
// consecutive proteins (tests/support/synthetic_clusters.h), prepared once
// per test program; and what the tests compare the loader with, read straight
// from the file.
#pragma once

#include <string>
#include <vector>

#include "data/cluster_sampling.h"
#include "data/h5.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/vocab.h"
#include "tests/data/data_test_util.h"
#include "tests/support/synthetic_clusters.h"

namespace pf::test {

struct ClusteredQuery {
  TempDir dir;
  std::string path = dir.file("clustered.h5");
  std::vector<int64_t> train_clusters;        // cluster of each train protein
  std::vector<std::vector<uint8_t>> windows;  // each train protein's residues then <end>
  ClusteredQuery() {
    PrepareOptions o;
    o.inputs = {kQueryFasta};
    o.output = path;
    o.val_fraction = o.test_fraction = 0.1;
    prepare_dataset(o);
    train_clusters = add_synthetic_clusters(path).at(0);
    H5Id f = h5_open_file(path);
    H5Id g = h5_open_group(f, "train");
    const auto tokens = h5_read_array<uint8_t>(g, "tokens");
    const auto offsets = h5_read_array<int64_t>(g, "offsets");
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      windows.emplace_back(tokens.begin() + offsets[i], tokens.begin() + offsets[i + 1]);
      windows.back().push_back(Vocab::kEnd);
    }
  }
  int64_t clusters() const { return train_clusters.back() + 1; }
};

inline const ClusteredQuery& clustered() {
  static const ClusteredQuery q;
  return q;
}

inline LoaderOptions cluster_options(SampleMode mode, int64_t L, int64_t batch) {
  LoaderOptions o;
  o.files = {clustered().path};
  o.mode = mode;
  o.sampling = Sampling::Cluster;
  o.sample_length = L;
  o.batch_size = batch;
  o.seed = 23;
  return o;
}

// Window position x of protein p (residues, <end>, then <pad>).
inline uint8_t window_at(int64_t p, int64_t x) {
  const std::vector<uint8_t>& w = clustered().windows[static_cast<size_t>(p)];
  return x < static_cast<int64_t>(w.size()) ? w[static_cast<size_t>(x)] : Vocab::kPad;
}

// The batches of one whole epoch from the loader's current position.
inline std::vector<Batch> read_epoch(DataLoader& loader) {
  std::vector<Batch> out;
  const int64_t epoch = loader.position().epoch;
  while (loader.position().epoch == epoch) out.push_back(loader.next());
  return out;
}

}  // namespace pf::test
