// Turns a prepared data file (split by sequence hash) into a cluster-split
// one with synthetic clusters, so that tests of cluster sampling need no
// MMseqs2: in each split, consecutive sequences form clusters of sizes 1, 2,
// 3, 5, 8, 1, 2, ... (the last one cut short), numbered across the splits in
// file order, so no cluster straddles two splits. The file passes
// data/clusters.h's checks; its content digest is left as it was.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/h5.h"
#include "data/schema.h"

namespace pf::test {

// Returns each split's cluster column (train, valid, test).
inline std::vector<std::vector<int64_t>> add_synthetic_clusters(const std::string& path) {
  const int64_t pattern[] = {1, 2, 3, 5, 8};
  H5Id file = h5_open_file(path, true);
  std::vector<std::vector<int64_t>> columns;
  std::vector<int64_t> sizes;
  std::vector<std::string> representatives;
  for (int s = 0; s < 3; ++s) {
    H5Id group = h5_open_group(file, kSplitNames[s]);
    const int64_t n = h5_read_attr_int64(group, "sequences");
    std::vector<int64_t> column;
    for (int64_t i = 0, k = 0; i < n; ++k) {
      const int64_t size = std::min(pattern[k % 5], n - i);
      sizes.push_back(size);
      representatives.push_back(std::string(kSplitNames[s]) + "-" + std::to_string(i));
      for (int64_t j = 0; j < size; ++j) column.push_back(static_cast<int64_t>(sizes.size()) - 1);
      i += size;
    }
    h5_write_vector(group, kClustersName, column);
    columns.push_back(column);
  }
  H5Id group = h5_create_group(file, std::string("/") + kClustersName);
  h5_write_strings(group, "representatives", representatives);
  h5_write_vector(group, "sizes", sizes);
  h5_write_attr_int64(group, "count", static_cast<int64_t>(sizes.size()));
  h5_write_attr_string(group, "mode", "synthetic");
  h5_write_attr_double(group, "identity", 0.5);
  h5_write_attr_double(group, "coverage", 0.8);
  h5_write_attr_string(group, "mmseqs_version", "none");
  h5_write_attr_string(file, kSplitRuleAttr, kSplitRuleCluster);
  return columns;
}

}  // namespace pf::test
