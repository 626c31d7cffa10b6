// Cluster-weighted sampling: see cluster_sampling.h.
#include "data/cluster_sampling.h"

#include <algorithm>

#include "data/protein_shards.h"
#include "data/schema.h"
#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {

Sampling parse_sampling(const std::string& name) {
  if (name == "sequence") return Sampling::Sequence;
  if (name == "cluster") return Sampling::Cluster;
  PF_REQUIRE(ValueError, false, "unknown sampling '" << name << "': expected sequence or cluster");
}

const char* sampling_name(Sampling sampling) { return sampling == Sampling::Cluster ? "cluster" : "sequence"; }

int64_t draw_member(uint64_t seed, int64_t epoch, int64_t cluster, int64_t size) {
  PF_REQUIRE(ValueError, size >= 1, "draw_member: cluster " << cluster << " has size " << size);
  const uint64_t n = static_cast<uint64_t>(size);
  // 2^64 mod n: draws below it would favour the low residues.
  const uint64_t reject_below = (0 - n) % n;
  const KeyedRandom rng(mix64(seed, 0xC1D5ull), static_cast<uint64_t>(epoch), static_cast<uint64_t>(cluster));
  for (uint64_t i = 0;; ++i) {
    const Philox4 r = rng.draw(i);
    for (int half = 0; half < 2; ++half) {
      const uint64_t bits = (static_cast<uint64_t>(r.v[2 * half + 1]) << 32) | r.v[2 * half];
      if (bits >= reject_below) return static_cast<int64_t>(bits % n);
    }
  }
}

SplitClusters::SplitClusters(const ProteinShards& shards, const std::string& needed_by) {
  std::vector<int64_t> cluster_of;
  int64_t base = 0;
  int index = 0;  // of the split in ClusterTable::members: train, valid, test, ood
  while (index < 3 && shards.split() != kSplitNames[index]) ++index;
  for (int64_t s = 0; s < shards.num_shards(); ++s) {
    const PreparedData& file = shards.shard_file(s);
    PF_REQUIRE(DataError, file.has_clusters(),
               needed_by << " needs a cluster-split data file, but '" << file.path()
                         << "' was split by sequence hash (prepare it with --cluster-identity, see docs/data.md)");
    // The whole table with every check that `performer-data info` makes: the
    // sizes, and no cluster in two of train, valid and test (a held-out
    // relative in training would be leakage this run could not see).
    const ClusterTable table = file.cluster_table();
    for (int64_t c : table.members[index]) cluster_of.push_back(base + c);
    base += static_cast<int64_t>(table.sizes.size());
  }
  build(cluster_of);
}

SplitClusters::SplitClusters(const std::vector<int64_t>& cluster_of_protein) { build(cluster_of_protein); }

void SplitClusters::build(const std::vector<int64_t>& cluster_of) {
  int64_t ids = 0;
  for (size_t p = 0; p < cluster_of.size(); ++p) {
    PF_REQUIRE(ValueError, cluster_of[p] >= 0, "protein " << p << " has the negative cluster id " << cluster_of[p]);
    ids = std::max(ids, cluster_of[p] + 1);
  }
  // Counting sort by id; ids without members drop out.
  std::vector<int64_t> dense(static_cast<size_t>(ids), 0);
  for (int64_t c : cluster_of) ++dense[static_cast<size_t>(c)];
  starts_.assign(1, 0);
  for (int64_t& d : dense) {
    if (d == 0) {
      d = -1;
      continue;
    }
    starts_.push_back(starts_.back() + d);
    d = static_cast<int64_t>(starts_.size()) - 2;  // the id's dense cluster index
  }
  std::vector<int64_t> next(starts_.begin(), starts_.end() - 1);
  members_.resize(cluster_of.size());
  for (size_t p = 0; p < cluster_of.size(); ++p)
    members_[static_cast<size_t>(next[static_cast<size_t>(dense[static_cast<size_t>(cluster_of[p])])]++)] =
        static_cast<int64_t>(p);
}

std::vector<int64_t> SplitClusters::drawn_proteins(uint64_t seed, int64_t epoch) const {
  std::vector<int64_t> out(static_cast<size_t>(count()));
  for (int64_t c = 0; c < count(); ++c) out[static_cast<size_t>(c)] = member(c, draw_member(seed, epoch, c, size(c)));
  return out;
}

}  // namespace pf
