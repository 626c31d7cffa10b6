// The check after a cluster split (data/cluster_split.h) that no split the
// fractions gave sequences to came out empty: whole clusters (families) go
// to one split, so one family larger than the held-out targets can take
// every sequence of another split. ValueError naming the split, the
// fraction options, the table (or --cluster-identity) and the family that
// took the sequences, before prepare writes anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/cluster_split.h"
#include "data/family_table.h"
#include "data/prepare.h"

namespace pf {

// cluster: per sequence its cluster; ood: per sequence 1 for /ood (not
// split); representative: per cluster its representative's sequence index;
// table: the --families table or null; id_of: a sequence's id (read only
// when the check fails).
void require_wanted_splits(const PrepareOptions& opt, const ClusterSplitInput& in, const ClusterSplitResult& r,
                           const std::vector<int64_t>& cluster, const std::vector<uint8_t>& ood,
                           const std::vector<int64_t>& representative, const FamilyTable* table,
                           const std::function<std::string(int64_t)>& id_of);

}  // namespace pf
