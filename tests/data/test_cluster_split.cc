// MMseqs2 result tables and the cluster split's logic, with a search that is
// a known similarity graph instead of MMseqs2: the split meets its targets,
// a cluster never straddles splits, and no held-out sequence keeps a hit in
// /train at or above the identity threshold.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "data/cluster_split.h"
#include "data/mmseqs.h"
#include "data_test_util.h"

namespace pf {
namespace {

struct Edge {
  int64_t a, b;
  double identity;
};

// Hits of every edge between a flagged query and a flagged target, in both
// directions, as MMseqs2 reports a symmetric relation.
ClusterSearchFn graph_search(const std::vector<Edge>& edges, int* calls) {
  return [edges, calls](const std::vector<uint8_t>& q, const std::vector<uint8_t>& t) {
    ++*calls;
    std::vector<SearchHit> hits;
    for (const Edge& e : edges)
      for (auto [x, y] : {std::pair{e.a, e.b}, std::pair{e.b, e.a}})
        if (q[static_cast<size_t>(x)] && t[static_cast<size_t>(y)]) hits.push_back({x, y, e.identity, 1, 1, 0});
    return hits;
  };
}

struct World {
  ClusterSplitInput in;
  std::vector<Edge> edges;
  std::vector<int64_t> size;
};

// n sequences in clusters of 1-8 members; `cross` random edges between
// sequences of different clusters with identities in [0.2, 1).
World make_world(int64_t n, int64_t cross, uint32_t seed) {
  std::mt19937_64 rng(seed);
  World w;
  int64_t c = 0;
  for (int64_t i = 0; i < n;) {
    const int64_t members = 1 + static_cast<int64_t>(rng() % 8);
    for (int64_t k = 0; k < members && i < n; ++k, ++i) w.in.cluster.push_back(c);
    w.in.cluster_key.push_back(rng());
    ++c;
  }
  w.size.assign(static_cast<size_t>(c), 0);
  for (int64_t x : w.in.cluster) ++w.size[static_cast<size_t>(x)];
  std::uniform_real_distribution<double> id(0.2, 1.0);
  while (static_cast<int64_t>(w.edges.size()) < cross) {
    const int64_t a = static_cast<int64_t>(rng() % n), b = static_cast<int64_t>(rng() % n);
    if (w.in.cluster[static_cast<size_t>(a)] != w.in.cluster[static_cast<size_t>(b)])
      w.edges.push_back({a, b, id(rng)});
  }
  w.in.targets[1] = n / 20;
  w.in.targets[2] = n / 20;
  return w;
}

int split_of_sequence(const World& w, const ClusterSplitResult& r, int64_t i) {
  return r.split[static_cast<size_t>(w.in.cluster[static_cast<size_t>(i)])];
}

TEST(ClusterSplit, WithoutHitsTakesClustersInKeyOrderUpToTheTargets) {
  World w = make_world(2000, 0, 1);
  int calls = 0;
  const ClusterSplitResult r = split_clusters(w.in, graph_search(w.edges, &calls), {});
  EXPECT_EQ(r.rounds, 1);
  EXPECT_EQ(r.clusters_moved, 0);
  std::vector<int64_t> order(w.size.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = static_cast<int64_t>(c);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return w.in.cluster_key[static_cast<size_t>(a)] < w.in.cluster_key[static_cast<size_t>(b)];
  });
  // Test takes the first clusters in key order, valid the next ones; each
  // reaches its target and overshoots by less than its last cluster.
  int64_t count[3] = {0, 0, 0};
  size_t k = 0;
  for (int s : {2, 1}) {
    int64_t last = 0;
    while (count[s] < w.in.targets[s]) {
      const int64_t c = order[k++];
      EXPECT_EQ(r.split[static_cast<size_t>(c)], s) << "cluster " << c;
      count[s] += last = w.size[static_cast<size_t>(c)];
    }
    EXPECT_EQ(r.held_out[s], count[s]);
    EXPECT_GE(r.held_out[s], w.in.targets[s]);
    EXPECT_LT(r.held_out[s] - w.in.targets[s], last);
  }
  for (; k < order.size(); ++k) EXPECT_EQ(r.split[static_cast<size_t>(order[k])], 0);
}

TEST(ClusterSplit, NoHeldOutSequenceKeepsATrainingHitAtTheThreshold) {
  for (uint32_t seed : {2u, 3u, 4u}) {
    World w = make_world(3000, 150, seed);
    w.in.identity = 0.5;
    int calls = 0;
    const ClusterSplitResult r = split_clusters(w.in, graph_search(w.edges, &calls), {});
    EXPECT_EQ(calls, r.rounds);
    EXPECT_GT(r.clusters_moved, 0) << "seed " << seed << ": the graph should leak at first";
    int64_t held[3] = {0, 0, 0}, leaks = 0, below = 0;
    for (size_t i = 0; i < w.in.cluster.size(); ++i) ++held[split_of_sequence(w, r, static_cast<int64_t>(i))];
    for (const Edge& e : w.edges) {
      const int sa = split_of_sequence(w, r, e.a), sb = split_of_sequence(w, r, e.b);
      if ((sa == 0) == (sb == 0)) continue;
      if (e.identity >= 0.5)
        ++leaks;
      else
        ++below;
    }
    EXPECT_EQ(leaks, 0) << "seed " << seed;
    EXPECT_GT(below, 0) << "seed " << seed << ": hits below the threshold are no leaks and stay";
    for (int s : {1, 2}) {
      EXPECT_EQ(held[s], r.held_out[s]);
      EXPECT_GE(r.held_out[s], w.in.targets[s]) << "seed " << seed << ": the refill reaches the target";
    }
  }
}

TEST(ClusterSplit, IsDeterministic) {
  World w = make_world(1500, 400, 5);
  int calls = 0;
  const ClusterSplitResult a = split_clusters(w.in, graph_search(w.edges, &calls), {});
  const ClusterSplitResult b = split_clusters(w.in, graph_search(w.edges, &calls), {});
  EXPECT_EQ(a.split, b.split);
  EXPECT_EQ(a.rounds, b.rounds);
}

TEST(ClusterSplit, ExcludedSequencesAreNeitherSearchedNorCounted) {
  World w = make_world(1000, 300, 6);
  w.in.excluded.assign(w.in.cluster.size(), 0);
  for (size_t i = 0; i < w.in.excluded.size(); i += 3) w.in.excluded[i] = 1;
  const std::vector<uint8_t> excluded = w.in.excluded;
  int calls = 0;
  ClusterSearchFn inner = graph_search(w.edges, &calls);
  auto search = [&](const std::vector<uint8_t>& q, const std::vector<uint8_t>& t) {
    for (size_t i = 0; i < q.size(); ++i)
      EXPECT_FALSE(excluded[i] && (q[i] || t[i])) << "excluded sequence " << i << " in a search";
    return inner(q, t);
  };
  const ClusterSplitResult r = split_clusters(w.in, search, {});
  int64_t held[3] = {0, 0, 0};
  for (size_t i = 0; i < w.in.cluster.size(); ++i)
    if (!excluded[i]) ++held[split_of_sequence(w, r, static_cast<int64_t>(i))];
  EXPECT_EQ(held[1], r.held_out[1]);
  EXPECT_EQ(held[2], r.held_out[2]);
}

TEST(ClusterSplit, WithoutRefillsItEndsCleanButMayBeShort) {
  World w = make_world(3000, 1500, 7);
  w.in.max_fill_rounds = 1;
  int calls = 0;
  std::vector<std::string> lines;
  const ClusterSplitResult r =
      split_clusters(w.in, graph_search(w.edges, &calls), [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(static_cast<int>(lines.size()), r.rounds);
  EXPECT_LT(r.held_out[1] + r.held_out[2], w.in.targets[1] + w.in.targets[2]);
  for (const Edge& e : w.edges) {
    const int sa = split_of_sequence(w, r, e.a), sb = split_of_sequence(w, r, e.b);
    if (e.identity >= w.in.identity) {
      EXPECT_EQ(sa == 0, sb == 0) << e.a << " " << e.b;
    }
  }
}

TEST(MmseqsTables, ClusterTableMapsMembersToRepresentatives) {
  test::TempDir dir;
  test::write_text(dir.file("c.tsv"), "s0\ts0\ns0\ts2\ns1\ts1\n");
  EXPECT_EQ(parse_cluster_table(dir.file("c.tsv"), 3), (std::vector<int64_t>{0, 1, 0}));
}

TEST(MmseqsTables, DamagedClusterTablesNameTheFileAndLine) {
  test::TempDir dir;
  auto error_of = [&](const std::string& text, int64_t n) {
    test::write_text(dir.file("c.tsv"), text);
    try {
      parse_cluster_table(dir.file("c.tsv"), n);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string f = dir.file("c.tsv");
  EXPECT_NE(error_of("s0\ts0\ns0\ts0\n", 1).find(f + ":2: sequence 's0' is in two clusters"), std::string::npos);
  EXPECT_NE(error_of("s0\ts0\n", 2).find(f + ": sequence 's1' is in no cluster"), std::string::npos);
  EXPECT_NE(error_of("s0 s0\n", 1).find(f + ":1: expected 'representative<TAB>member'"), std::string::npos);
  EXPECT_NE(error_of("x0\ts0\n", 1).find(f + ":1: 'x0' is not a sequence name"), std::string::npos);
  EXPECT_NE(error_of("s5\ts0\n", 1).find(f + ":1: sequence 's5' does not exist (1 sequences)"), std::string::npos);
  EXPECT_NE(error_of("s1\ts0\ns0\ts1\n", 2).find("representative 's1' of 's0' is itself in the cluster of 's0'"),
            std::string::npos);
}

TEST(MmseqsTables, SearchTableParsesAndRefusesBadFields) {
  test::TempDir dir;
  test::write_text(dir.file("s.m8"), "s1\ts0\t0.950\t1.000\t0.900\t5.377E-319\ns0\ts1\t0.5\t0.8\t0.85\t1e-5\n");
  const std::vector<SearchHit> h = parse_search_table(dir.file("s.m8"), 2, 2);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].query, 1);
  EXPECT_EQ(h[0].target, 0);
  EXPECT_DOUBLE_EQ(h[0].identity, 0.95);
  EXPECT_DOUBLE_EQ(h[0].target_coverage, 0.9);
  EXPECT_GT(h[0].evalue, 0);  // an underflowing e-value is still a number
  test::write_text(dir.file("s.m8"), "s1\ts0\t0.9x\t1\t1\t0\n");
  try {
    parse_search_table(dir.file("s.m8"), 2, 2);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("s.m8") + ":1: fident '0.9x' is not a number"), std::string::npos)
        << e.what();
  }
  test::write_text(dir.file("s.m8"), "s1\ts0\t0.9\n");
  EXPECT_THROW(parse_search_table(dir.file("s.m8"), 2, 2), DataError);
}

TEST(MmseqsTables, SequenceNamesRoundTrip) {
  EXPECT_EQ(sequence_name(12345), "s12345");
  EXPECT_EQ(parse_sequence_index("s12345", 12346, "here"), 12345);
  EXPECT_THROW(parse_sequence_index("s", 1, "here"), DataError);
  EXPECT_THROW(parse_sequence_index("s-1", 1, "here"), DataError);
}

}  // namespace
}  // namespace pf
