// The one opener of prepared protein data files (the schema of
// data/schema.h, written by `performer-data prepare`; docs/data.md). Every
// tool that reads such a file opens it with open_prepared_data(), which
// checks what the file declares before a reader allocates anything of it:
//   root      schema name and version (1 or 2) and the vocabulary; the
//             split rule ("sequence" or "cluster"; absent in version 1:
//             sequence); the content digest when the file has one
//             ("fnv1a64:" + 16 hex digits); the attributes prepare records
//             (sources, seed, val_fraction, test_fraction, map_unknown_to_x,
//             sequences_read, duplicates_dropped; ood_organisms optional);
//   splits    /train, /valid, /test and, when present, /ood: the group's
//             `sequences` and `residues` against its datasets, each of the
//             type the schema stores and stored as declared:
//               tokens   uint8 [residues]        offsets  int64 [sequences + 1]
//               ids, headers   vlen string [sequences]
//             with sequences <= residues (no sequence is empty);
//   clusters  of a cluster split: the /clusters group, its attributes, and
//             its count against the file's sequences (a cluster has a member).
// What costs a read of every entry is checked when a reader asks for it:
// open_split() checks the split's offsets entry by entry (the loader,
// `performer-data info`, the audit), cluster_table() the cluster table and
// columns (data/clusters.h; cluster sampling, family mode, info). Each
// failure is a DataError naming the file and the dataset or attribute;
// a file HDF5 cannot read is an Hdf5Error naming it, a missing one an IoError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/clusters.h"
#include "data/h5.h"

namespace pf {

// The counts a split's group records, checked against its datasets.
struct SplitExtent {
  int64_t sequences = 0, residues = 0;
};

// A split's residues and offsets, opened after every offset was checked
// (offsets[0] = 0, increasing, within the tokens, the last = residues).
struct PreparedSplit {
  std::string name;
  SplitExtent extent;
  H5Id tokens;   // uint8 [residues]
  H5Id offsets;  // int64 [sequences + 1]
};

// Every offset of an opened split: [sequences + 1], 8 bytes a sequence.
std::vector<int64_t> read_offsets(const PreparedSplit& split);

class PreparedData {
 public:
  const std::string& path() const { return path_; }
  const std::string& schema() const { return schema_; }
  int64_t schema_version() const { return schema_version_; }
  const std::string& vocabulary() const { return vocabulary_; }
  // "sequence" or "cluster" (kSplitRuleSequence / kSplitRuleCluster of
  // data/schema.h).
  const std::string& split_rule() const { return split_rule_; }
  bool has_clusters() const;
  // "" for files prepared before the digest existed.
  const std::string& content_digest() const { return content_digest_; }

  // What prepare recorded of its run.
  const std::vector<std::string>& sources() const { return sources_; }
  int64_t seed() const { return seed_; }
  double val_fraction() const { return val_fraction_; }
  double test_fraction() const { return test_fraction_; }
  int64_t sequences_read() const { return sequences_read_; }
  int64_t duplicates_dropped() const { return duplicates_dropped_; }
  // Empty when prepare held out no organism.
  const std::vector<std::string>& ood_organisms() const { return ood_organisms_; }

  // "train", "valid", "test", then "ood" when the file has it.
  const std::vector<std::string>& split_names() const { return split_names_; }
  bool has_split(const std::string& split) const;
  // DataError naming the file when it has no such split.
  const SplitExtent& extent(const std::string& split) const;
  // The split's tokens and offsets (each with a chunk cache of `cache_bytes`
  // when > 0), after its offsets were checked entry by entry, read in blocks
  // of 65,536: DataError naming the file, the dataset, the first bad index
  // and the values.
  PreparedSplit open_split(const std::string& split, int64_t cache_bytes = 0) const;

  // Of a cluster split (DataError naming the file otherwise): the /clusters
  // group's attributes, checked at opening.
  const ClusterParameters& cluster_parameters() const;
  // The whole cluster table with every check of data/clusters.h.
  ClusterTable cluster_table() const;

  // How the file's sequences were assigned to splits, as text ("sequence
  // hash, seed 0, valid 0.1, test 0.1"; cluster splits add their identity
  // and coverage, held-out organisms their names). Two files prepared from
  // one source hold its proteins in the same splits only when it is equal.
  std::string split_parameters() const;
  // The file names (without folders) of the sources.
  std::vector<std::string> source_names() const;

 private:
  friend PreparedData open_prepared_data(const std::string& path);
  PreparedData() = default;

  std::string path_;
  H5Id file_;
  std::string schema_, vocabulary_, split_rule_, content_digest_;
  int64_t schema_version_ = 0;
  std::vector<std::string> sources_, ood_organisms_;
  int64_t seed_ = 0, sequences_read_ = 0, duplicates_dropped_ = 0;
  double val_fraction_ = 0, test_fraction_ = 0;
  std::vector<std::string> split_names_;
  std::vector<SplitExtent> extents_;  // one per split_names_ entry
  ClusterParameters cluster_parameters_;
};

// Opens a prepared data file read-only with the checks above.
PreparedData open_prepared_data(const std::string& path);

}  // namespace pf
