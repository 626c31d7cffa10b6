// Cluster-weighted sampling (data.sampling = "cluster", docs/data.md): an
// epoch visits every cluster of the split once and draws one member per
// visit, so that a family of a thousand near-copies weighs as much as a
// singleton.
//   member   the member drawn for cluster c in epoch e is member
//            draw_member(seed, e, c, size(c)) of c, uniform over its members
//            (rejection sampling on 64-bit Philox draws: no modulo bias) and
//            keyed by (seed, epoch, cluster) alone, so every rank computes
//            the same draw without communication and a resumed run the same
//            epoch.
//   clusters numbered over the shards in the order the files are given, and
//            within a file in the order of its /clusters table; only the
//            clusters with a member in the split count. Clusters of
//            different files are distinct (each file was clustered alone).
//   members  of a cluster in ascending protein index (the split's numbering
//            of data/protein_shards.h).
// An epoch's proteins (drawn_proteins) are then laid out as the data mode
// says: single: sample s is the protein drawn for cluster perm_e(s); concat:
// the drawn proteins back to back in cluster order, cut into samples of L;
// packed: a packing plan over the drawn proteins keyed by (seed, epoch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

class ProteinShards;  // data/protein_shards.h

enum class Sampling { Sequence, Cluster };
// "sequence" | "cluster"; ValueError otherwise.
Sampling parse_sampling(const std::string& name);
const char* sampling_name(Sampling sampling);

// Uniform index in [0, size) keyed by (seed, epoch, cluster); size >= 1.
int64_t draw_member(uint64_t seed, int64_t epoch, int64_t cluster, int64_t size);

class SplitClusters {
 public:
  // The clusters of the shards' split, from each file's cluster table (its
  // handle's cluster_table(), data/prepared_data.h), in the shards' order.
  // DataError naming the file and `needed_by` (the setting that needs them)
  // when one has no clusters (split by sequence hash, or schema version 1),
  // or naming the file for a damaged cluster table or column
  // (data/clusters.h).
  SplitClusters(const ProteinShards& shards, const std::string& needed_by = "data.sampling = \"cluster\"");
  // From each protein's cluster (any non-negative ids; clusters numbered in
  // ascending id order). ValueError for a negative id.
  explicit SplitClusters(const std::vector<int64_t>& cluster_of_protein);

  int64_t count() const { return static_cast<int64_t>(starts_.size()) - 1; }
  int64_t proteins() const { return static_cast<int64_t>(members_.size()); }
  int64_t size(int64_t c) const { return starts_[static_cast<size_t>(c) + 1] - starts_[static_cast<size_t>(c)]; }
  // Member k of cluster c, k in [0, size(c)).
  int64_t member(int64_t c, int64_t k) const {
    return members_[static_cast<size_t>(starts_[static_cast<size_t>(c)] + k)];
  }
  // The protein drawn for each cluster in epoch `epoch`, in cluster order.
  std::vector<int64_t> drawn_proteins(uint64_t seed, int64_t epoch) const;

 private:
  void build(const std::vector<int64_t>& cluster_of_protein);
  std::vector<int64_t> starts_;   // [count + 1]: first entry of each cluster in members_
  std::vector<int64_t> members_;  // [proteins]: grouped by cluster, ascending within each
};

}  // namespace pf
