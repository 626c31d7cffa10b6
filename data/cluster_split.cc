// Splits by cluster with a leak purge: see cluster_split.h.
#include "data/cluster_split.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "runtime/check.h"

namespace pf {

ClusterSplitResult split_clusters(const ClusterSplitInput& in, const ClusterSearchFn& search,
                                  const std::function<void(const std::string&)>& progress) {
  const int64_t n = static_cast<int64_t>(in.cluster.size());
  const int64_t clusters = static_cast<int64_t>(in.cluster_key.size());
  PF_REQUIRE(ValueError, in.excluded.empty() || static_cast<int64_t>(in.excluded.size()) == n,
             "split_clusters: " << in.excluded.size() << " exclusion flags for " << n << " sequences");
  std::vector<int64_t> size(static_cast<size_t>(clusters), 0);  // members that take part in the split
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = in.cluster[static_cast<size_t>(i)];
    PF_REQUIRE(ValueError, c >= 0 && c < clusters,
               "split_clusters: sequence " << i << " in cluster " << c << " of " << clusters);
    if (in.excluded.empty() || !in.excluded[static_cast<size_t>(i)]) ++size[static_cast<size_t>(c)];
  }
  std::vector<int64_t> order;
  for (int64_t c = 0; c < clusters; ++c)
    if (size[static_cast<size_t>(c)] > 0) order.push_back(c);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const uint64_t ka = in.cluster_key[static_cast<size_t>(a)], kb = in.cluster_key[static_cast<size_t>(b)];
    return ka != kb ? ka < kb : a < b;
  });

  ClusterSplitResult r;
  r.split.assign(static_cast<size_t>(clusters), 0);
  std::vector<uint8_t> rejected(static_cast<size_t>(clusters), 0);
  size_t cursor = 0;  // clusters before it in `order` were offered once already
  auto fill_would_add = [&] {
    if (r.held_out[2] >= in.targets[2] && r.held_out[1] >= in.targets[1]) return false;
    return cursor < order.size();
  };
  auto fill = [&] {
    // Test first, then valid, as the hash order of the sequence rule does.
    for (int s : {2, 1})
      while (r.held_out[s] < in.targets[s] && cursor < order.size()) {
        const int64_t c = order[cursor++];
        if (rejected[static_cast<size_t>(c)]) continue;
        r.split[static_cast<size_t>(c)] = static_cast<uint8_t>(s);
        r.held_out[s] += size[static_cast<size_t>(c)];
      }
  };
  bool fill_allowed = true;
  for (;;) {
    if (fill_allowed) fill();
    std::vector<uint8_t> query(static_cast<size_t>(n), 0), target(static_cast<size_t>(n), 0);
    int64_t queries = 0, targets = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!in.excluded.empty() && in.excluded[static_cast<size_t>(i)]) continue;
      const bool held = r.split[static_cast<size_t>(in.cluster[static_cast<size_t>(i)])] != 0;
      (held ? query : target)[static_cast<size_t>(i)] = 1;
      ++(held ? queries : targets);
    }
    const std::vector<SearchHit> hits = (queries > 0 && targets > 0) ? search(query, target) : std::vector<SearchHit>{};
    ++r.rounds;
    int64_t moved = 0, moved_sequences = 0;
    for (const SearchHit& h : hits) {
      PF_REQUIRE(ValueError, h.query >= 0 && h.query < n && h.target >= 0 && h.target < n,
                 "split_clusters: a hit names sequence " << h.query << " or " << h.target << " of " << n);
      if (h.identity < in.identity || !query[static_cast<size_t>(h.query)] || !target[static_cast<size_t>(h.target)])
        continue;
      const int64_t c = in.cluster[static_cast<size_t>(h.query)];
      const int s = r.split[static_cast<size_t>(c)];
      if (s == 0) continue;  // moved by an earlier hit of this round
      r.held_out[s] -= size[static_cast<size_t>(c)];
      r.split[static_cast<size_t>(c)] = 0;
      rejected[static_cast<size_t>(c)] = 1;
      ++moved;
      moved_sequences += size[static_cast<size_t>(c)];
    }
    r.clusters_moved += moved;
    r.sequences_moved += moved_sequences;
    if (progress) {
      std::ostringstream line;
      line << "  split round " << r.rounds << ": searched " << queries << " held-out against " << targets
           << " training sequences; " << moved << " cluster(s) (" << moved_sequences
           << " sequences) with a hit at identity >= " << in.identity << " moved to train; valid " << r.held_out[1]
           << " of " << in.targets[1] << ", test " << r.held_out[2] << " of " << in.targets[2] << "\n";
      progress(line.str());
    }
    if (r.rounds >= in.max_fill_rounds) fill_allowed = false;
    if (moved == 0 && (!fill_allowed || !fill_would_add())) break;
  }
  return r;
}

}  // namespace pf
