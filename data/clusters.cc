// Cluster tables of data files: see clusters.h.
#include "data/clusters.h"

#include "data/h5.h"
#include "data/schema.h"

namespace pf {

namespace {

// Cluster of each sequence of one split (checked against the split's
// sequence count and the number of clusters).
std::vector<int64_t> read_split_clusters(hid_t file, const std::string& path, const std::string& split,
                                         int64_t clusters) {
  const std::string where = "'" + path + "' dataset /" + split + "/" + kClustersName;
  H5Id group = h5_open_group(file, split);
  PF_REQUIRE(DataError, h5_exists(group, kClustersName), where << " is missing (the file's split_rule is cluster)");
  const int64_t sequences = h5_read_attr_int64(group, "sequences");
  // Its length before its values: a crafted one is refused before it is allocated.
  const std::vector<int64_t> shape = h5_dataset_shape(H5Id(h5_open_dataset(group, kClustersName)).get());
  PF_REQUIRE(DataError, shape.size() == 1 && shape[0] == sequences,
             where << " holds " << (shape.size() == 1 ? shape[0] : -1) << " entries for the split's " << sequences
                   << " sequences");
  std::vector<int64_t> c = h5_read_array<int64_t>(group, kClustersName);
  for (size_t i = 0; i < c.size(); ++i)
    PF_REQUIRE(DataError, c[i] >= 0 && c[i] < clusters,
               where << ": entry " << i << " is cluster " << c[i] << ", outside 0 .. " << clusters - 1);
  return c;
}

}  // namespace

ClusterParameters read_cluster_parameters(hid_t file, const std::string& path, int64_t sequences) {
  const std::string where = "'" + path + "' group /" + kClustersName;
  PF_REQUIRE(DataError, h5_exists(file, kClustersName), where << " is missing (the file's split_rule is cluster)");
  H5Id group = h5_open_group(file, kClustersName);
  for (const char* attr : {"count", "mode", "identity", "coverage", "mmseqs_version"})
    PF_REQUIRE(DataError, h5_has_attr(group, attr), where << " lacks the attribute '" << attr << "'");
  ClusterParameters p;
  p.count = h5_read_attr_int64(group, "count");
  p.mode = h5_read_attr_string(group, "mode");
  p.identity = h5_read_attr_double(group, "identity");
  p.coverage = h5_read_attr_double(group, "coverage");
  p.mmseqs_version = h5_read_attr_string(group, "mmseqs_version");
  if (h5_has_attr(group, "split_rounds")) p.split_rounds = h5_read_attr_int64(group, "split_rounds");
  if (h5_has_attr(group, "clusters_moved_to_train"))
    p.clusters_moved = h5_read_attr_int64(group, "clusters_moved_to_train");
  if (h5_has_attr(group, "sequences_moved_to_train"))
    p.sequences_moved = h5_read_attr_int64(group, "sequences_moved_to_train");
  // A cluster has a member: count is bounded by the file's sequences, and the
  // tables' shapes by count, before either is read.
  PF_REQUIRE(DataError, p.count >= 0 && p.count <= sequences,
             where << ": count = " << p.count << " clusters for the file's " << sequences
                   << " sequences (a cluster has at least one member)");
  return p;
}

ClusterTable read_cluster_table(hid_t file, const std::string& path, const ClusterParameters& parameters) {
  const std::string where = "'" + path + "' group /" + kClustersName;
  H5Id group = h5_open_group(file, kClustersName);
  ClusterTable t;
  t.parameters = parameters;
  const int64_t count = parameters.count;
  for (const char* name : {"representatives", "sizes"})
    PF_REQUIRE(DataError, h5_exists(group, name), where << " lacks the dataset '" << name << "'");
  h5_require_shape(H5Id(h5_open_dataset(group, "representatives")).get(), {count}, "one per cluster, count");
  h5_require_shape(H5Id(h5_open_dataset(group, "sizes")).get(), {count}, "one per cluster, count");
  t.representatives = h5_read_strings(group, "representatives");
  t.sizes = h5_read_array<int64_t>(group, "sizes");
  PF_REQUIRE(DataError, count >= 0 && static_cast<int64_t>(t.representatives.size()) == count,
             "'" << path << "' dataset /" << kClustersName << "/representatives holds " << t.representatives.size()
                 << " entries for count = " << count);
  PF_REQUIRE(DataError, static_cast<int64_t>(t.sizes.size()) == count,
             "'" << path << "' dataset /" << kClustersName << "/sizes holds " << t.sizes.size()
                 << " entries for count = " << count);
  std::vector<int64_t> seen(static_cast<size_t>(count), 0);
  const char* splits[4] = {kSplitNames[0], kSplitNames[1], kSplitNames[2], kOodSplitName};
  for (int s = 0; s < 4; ++s) {
    if (s == 3 && !h5_exists(file, kOodSplitName)) continue;
    t.members[s] = read_split_clusters(file, path, splits[s], count);
    for (int64_t c : t.members[s]) ++seen[static_cast<size_t>(c)];
  }
  for (int64_t c = 0; c < count; ++c)
    PF_REQUIRE(DataError, seen[static_cast<size_t>(c)] == t.sizes[static_cast<size_t>(c)],
               "'" << path << "' dataset /" << kClustersName << "/sizes: cluster " << c << " ('"
                   << t.representatives[static_cast<size_t>(c)] << "') has size " << t.sizes[static_cast<size_t>(c)]
                   << " but " << seen[static_cast<size_t>(c)] << " sequences name it");
  // A cluster never straddles train, valid and test (ood is by organism).
  std::vector<int8_t> split_of(static_cast<size_t>(count), -1);
  for (int s = 0; s < 3; ++s)
    for (int64_t c : t.members[s]) {
      int8_t& o = split_of[static_cast<size_t>(c)];
      PF_REQUIRE(DataError, o < 0 || o == s,
                 "'" << path << "': cluster " << c << " ('" << t.representatives[static_cast<size_t>(c)]
                     << "') has members in /" << kSplitNames[o] << " and /" << kSplitNames[s]);
      o = static_cast<int8_t>(s);
    }
  return t;
}

}  // namespace pf
