// Family contexts (data.mode = "family", docs/data.md#family-contexts): the
// proteins of one family (a cluster of the data file's /clusters table, made
// at the family identity) back to back in one context, so that each member is
// read after its relatives.
//   order     the members of family f in epoch e in a keyed permutation of
//             (seed, epoch, f): every rank computes the same order without
//             communication, and a resumed run the same epoch
//   contexts  the ordered members cut greedily into runs of at most L tokens
//             (residues + <end> each): a member that does not fit after the
//             run so far starts the next run; a member of L tokens or more
//             is a context of its own (cropped to a window of L by the
//             packing, as in packed mode)
//   sampling  Sequence: every context of every family, so each protein is
//             read once per epoch; Cluster: the first context of each family
//             only (a drawn subset of a large family), so each family counts
//             once per epoch whatever its size
// Contexts are listed family by family in the order of the SplitClusters
// (data/cluster_sampling.h); PackedSamples packs them (data/packed_samples.h).
#pragma once

#include <cstdint>
#include <vector>

#include "data/cluster_sampling.h"

namespace pf {

// tokens[p] = residues + 1 of every protein p of the split; L >= 1.
std::vector<std::vector<int64_t>> family_contexts(const SplitClusters& families, const std::vector<int64_t>& tokens,
                                                  int64_t sample_length, uint64_t seed, int64_t epoch,
                                                  Sampling sampling);

}  // namespace pf
