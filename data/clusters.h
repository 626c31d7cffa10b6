// Reading the clusters of a cluster-split data file (/clusters and each
// split's cluster column, data/schema.h), with every consistency check a
// damaged file can fail: DataError naming the file and the dataset.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

struct ClusterTable {
  std::string mode, mmseqs_version;
  double identity = 0, coverage = 0;
  int64_t split_rounds = 0, clusters_moved = 0, sequences_moved = 0;
  std::vector<std::string> representatives;  // per cluster
  std::vector<int64_t> sizes;                // per cluster: members in all splits
  // Per split (train, valid, test, ood): each sequence's cluster; ood empty
  // when the file has no /ood group.
  std::vector<int64_t> members[4];
};

// True when the file's split_rule is "cluster".
bool has_clusters(hid_t file);

// The cluster table of an open data file whose split_rule is "cluster".
ClusterTable read_cluster_table(hid_t file, const std::string& path);

// Cluster of each sequence of one split (checked against the split's
// sequence count and the number of clusters).
std::vector<int64_t> read_split_clusters(hid_t file, const std::string& path, const std::string& split,
                                         int64_t clusters);

}  // namespace pf
