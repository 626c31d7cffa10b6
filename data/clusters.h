// The clusters of a cluster-split data file (/clusters and each split's
// cluster column, data/schema.h), with every consistency check a damaged
// file can fail: DataError naming the file and the dataset. Readers get
// them from the file's handle (data/prepared_data.h: cluster_parameters()
// when it opens the file, cluster_table() for the table); these are the
// checks behind it.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

// The attributes of the /clusters group.
struct ClusterParameters {
  std::string mode, mmseqs_version;
  double identity = 0, coverage = 0;
  int64_t count = 0;  // clusters
  int64_t split_rounds = 0, clusters_moved = 0, sequences_moved = 0;
};

struct ClusterTable {
  ClusterParameters parameters;
  std::vector<std::string> representatives;  // per cluster
  std::vector<int64_t> sizes;                // per cluster: members in all splits
  // Per split (train, valid, test, ood): each sequence's cluster; ood empty
  // when the file has no /ood group.
  std::vector<int64_t> members[4];
};

// The /clusters group of a data file whose split_rule is "cluster": its
// attributes, with count checked against `sequences` (the file's, in all
// splits: a cluster has a member).
ClusterParameters read_cluster_parameters(hid_t file, const std::string& path, int64_t sequences);

// The table and every split's column, given the group's checked attributes:
// shapes against count and each split's sequences before anything is read,
// every index below count, each cluster's size equal to the sequences that
// name it, and no cluster in two of train, valid and test.
ClusterTable read_cluster_table(hid_t file, const std::string& path, const ClusterParameters& parameters);

}  // namespace pf
