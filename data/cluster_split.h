// Splits by cluster with a leak purge (docs/data.md#homology-aware-splits).
// Clusters are taken in the order of a keyed hash of each cluster (its
// representative's residues and the seed): /test takes clusters until it
// holds at least its target number of sequences, /valid the next ones. Then
// every held-out sequence is searched against /train; a held-out cluster with
// a hit at or above the identity threshold (with the clustering's coverage)
// moves to /train for good, and the held-out splits are refilled with the
// next clusters in hash order. Rounds repeat until a search of the final
// assignment finds no hit; refills stop after `max_fill_rounds`, so a split
// may end below its target (the summary says by how much). The search is a
// callback so that the logic is testable without MMseqs2.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/mmseqs.h"

namespace pf {

struct ClusterSplitInput {
  std::vector<int64_t> cluster;       // per sequence: its cluster, 0 .. clusters-1
  std::vector<uint8_t> excluded;      // per sequence: 1 when it goes to no split (an /ood sequence); may be empty
  std::vector<uint64_t> cluster_key;  // per cluster: the hash that orders clusters
  int64_t targets[3] = {0, 0, 0};     // sequences wanted in valid [1] and test [2]; [0] unused
  double identity = 0.5;              // a held-out hit at or above it is a leak
  int max_fill_rounds = 6;
};

struct ClusterSplitResult {
  std::vector<uint8_t> split;  // per cluster: 0 train, 1 valid, 2 test
  int rounds = 0;              // searches run
  int64_t clusters_moved = 0;  // held-out clusters moved to /train for a leak
  int64_t sequences_moved = 0;
  int64_t held_out[3] = {0, 0, 0};  // sequences in each split at the end (excluded ones not counted)
};

// search(query, target): hits of the sequences flagged in `query` against
// those flagged in `target` (flags per sequence), with the coverage filter
// already applied. `progress` (may be empty) gets one line per round.
using ClusterSearchFn =
    std::function<std::vector<SearchHit>(const std::vector<uint8_t>& query, const std::vector<uint8_t>& target)>;
ClusterSplitResult split_clusters(const ClusterSplitInput& in, const ClusterSearchFn& search,
                                  const std::function<void(const std::string&)>& progress);

}  // namespace pf
