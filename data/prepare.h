// Preparation of protein data files: reads FASTA / Swiss-Prot inputs (plain or
// gzipped), drops exact duplicate sequences, assigns each sequence to
// train / valid / test by a keyed hash of its residues (so one sequence can
// never land in two splits), and writes the HDF5 schema of data/schema.h.
// With ood_organisms, sequences whose header's OS= value contains one of the
// names (case-insensitive) go to a fourth split /ood instead: whole organisms
// held out of training, for out-of-distribution evaluation.
// Output goes to "<output>.tmp-<pid>" and is renamed to <output> only after it
// is complete and closed; on any error, and on a stop request, the temporary
// file is removed. Temporary files "<output>.tmp-<pid>" left by processes that
// no longer exist (killed with SIGKILL, crashed) are removed at the start.
// The output is a ReplaceableOutput (data/replaceable_output.h): a new file or
// an earlier prepared data file, never an input or any other file
// (ConfigError naming both).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "data/id_conflicts.h"
#include "data/mmseqs.h"
#include "data/output_path.h"
#include "data/scratch_folder.h"
#include "runtime/errors.h"

namespace pf {

// /clusters' mode attribute of a file whose clusters came from --families.
constexpr const char* kGivenFamiliesMode = "families";

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string output;
  // Fractions of sequences in /valid and /test, each >= 0 and summing to at
  // most 1: val 0 + test 1 puts every sequence in /test, val 1 + test 0 in
  // /valid, both 0 in /train.
  double val_fraction = 0.01;
  double test_fraction = 0.01;
  uint64_t seed = 0;
  bool map_unknown_to_x = false;
  std::vector<std::string> ood_organisms;  // OS= substrings routed to /ood; empty = no /ood group
  // Homology-aware split (docs/data.md#homology-aware-splits): with
  // cluster.identity > 0 the sequences are clustered with MMseqs2 and split by
  // cluster with a leak purge (data/cluster_split.h); 0 keeps the split by
  // sequence hash.
  ClusterParams cluster{0.0, 0.8, "linclust"};
  // With a cluster split: a table of given families (data/family_table.h)
  // taken as the clusters instead of MMseqs2's clustering ("" = cluster);
  // the leak purge still searches with MMseqs2 at cluster.identity. Every
  // sequence kept must have a family; /clusters records the mode as
  // kGivenFamiliesMode.
  std::string families;
  MmseqsSettings mmseqs;
  // Bytes for the duplicate sort (data/duplicates.h), and later for the
  // identifier sort (data/id_conflicts.h): beyond it the keys go to sorted
  // runs on disk beside the output. At least 1 MiB.
  int64_t memory_budget = int64_t{2} << 30;
  // Threads of the writing pass: one parses and writes, the others compress
  // the output's chunks (data/h5_direct_appender.h). 0: the machine's cores.
  int threads = 0;
  std::ostream* progress = nullptr;        // per-file progress lines (stderr in the CLI); nullptr = silent
  // Polled between records and before the final rename; when it returns true
  // the run stops with PrepareStopped (the CLI's SIGINT / SIGTERM flag).
  std::function<bool()> stop_requested;
};

// A run ended by options.stop_requested; its temporary file is removed.
class PrepareStopped : public Error {
 public:
  explicit PrepareStopped(const std::string& what) : Error(ErrorKind::Io, what) {}
};

// Nearest-rank percentiles of sequence lengths (residues, no end token).
struct LengthStats {
  int64_t count = 0, residues = 0;
  int64_t min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t longer_than_8192 = 0;
};
LengthStats length_stats(const std::vector<int64_t>& lengths);
// The same statistics from counts per length: memory grows with the number
// of distinct lengths, not of sequences.
class LengthHistogram {
 public:
  void add(int64_t residues) { ++counts_[residues]; }
  LengthStats stats() const;

 private:
  std::map<int64_t, int64_t> counts_;
};

struct SplitCounts {
  int64_t sequences = 0, residues = 0;
};

struct PrepareSummary {
  int64_t sequences_read = 0;      // records in all inputs
  int64_t bytes_read = 0;          // uncompressed input bytes
  int64_t duplicates_dropped = 0;  // exact repeats of an earlier sequence
  int64_t sort_runs = 0;  // runs the duplicate and identifier sorts wrote to disk (0: within the budget in memory)
  // Identifiers held by two or more kept (hence different) sequences, with
  // the earliest such identifier and the places of its first two records
  // ("a.fasta:12 and a.fasta:340"); a warning, not an error.
  IdConflicts id_conflicts;
  std::string shared_id, shared_id_places;
  SplitCounts splits[3];           // train, valid, test
  SplitCounts ood;                 // /ood (zero when no ood_organisms)
  // Per ood_organisms name, in its order: the kept sequences whose organism
  // it matched (a sequence may match several names); and the kept
  // sequences whose header has no OS= field (counted with ood_organisms only).
  std::vector<std::pair<std::string, int64_t>> ood_matches;
  int64_t without_organism = 0;
  LengthStats lengths;             // over the kept sequences
  // Cluster split only (clusters == 0 otherwise).
  int64_t clusters = 0;
  int split_rounds = 0;
  int64_t clusters_moved = 0, sequences_moved = 0;
};

// What prepare writes, recognised by its root attributes (schema, vocabulary,
// sources), for the output-path rule.
OutputKind prepared_data_kind();

PrepareSummary prepare_dataset(const PrepareOptions& options);

// A data file prepared into a fresh folder under the temporary directory
// (TMPDIR, else /tmp) for one-off use, such as `performer-eval --fasta`. The
// file is "<folder>/<name of the first input>.h5"; options.output is ignored.
// The destructor removes the folder with everything in it; a failed or
// stopped preparation removes it before the error leaves the constructor.
// The folder is a scratch folder (data/scratch_folder.h, prefix
// "pf-dataset-"): one left by a process that was killed is removed by the
// next TemporaryDataset made under the same temporary directory.
class TemporaryDataset {
 public:
  explicit TemporaryDataset(PrepareOptions options);
  ~TemporaryDataset();
  TemporaryDataset(const TemporaryDataset&) = delete;
  TemporaryDataset& operator=(const TemporaryDataset&) = delete;
  const std::string& path() const { return path_; }
  const std::string& folder() const { return folder_->path(); }
  const PrepareSummary& summary() const { return summary_; }
  static constexpr const char* kPrefix = "pf-dataset-";

 private:
  std::unique_ptr<ScratchFolder> folder_;
  std::string path_;
  PrepareSummary summary_;
};

// Split of a sequence: 0 train, 1 valid, 2 test; u = mix64(seed, FNV-1a(tokens))
// as a fraction in [0, 1): test if u < test_fraction, valid if u < test + val.
int split_of(const uint8_t* tokens, int64_t n, uint64_t seed, double val_fraction, double test_fraction);

// The OS= value of a UniProt header ("Homo sapiens" from "... OS=Homo sapiens
// OX=9606 GN=..."): the text after "OS=" up to the next " XX=" field or the
// end, trimmed; "" when the header has no OS= field.
std::string organism_of(const std::string& header);
// Per name of `names`: whether organism_of(header) contains it (ASCII
// case-insensitive); all false when the header has no OS= field.
std::vector<bool> organism_matches(const std::string& header, const std::vector<std::string>& names);
// True when organism_of(header) contains one of `names`.
bool is_ood_organism(const std::string& header, const std::vector<std::string>& names);

// What `performer-data info` prints.
struct DatasetInfo {
  std::string path, schema, vocabulary;
  std::string content_digest;  // "" for files prepared before it existed
  std::vector<std::string> sources;
  int64_t seed = 0, sequences_read = 0, duplicates_dropped = 0;
  double val_fraction = 0, test_fraction = 0;
  SplitCounts splits[3];
  LengthStats lengths[3];
  std::vector<std::string> ood_organisms;  // empty when the file has no /ood group
  SplitCounts ood;
  int64_t schema_version = 0;
  std::string split_rule;  // "sequence" or "cluster"
  // Cluster split only.
  std::string cluster_mode, mmseqs_version;
  double cluster_identity = 0, cluster_coverage = 0;
  int64_t clusters = 0, singleton_clusters = 0, largest_cluster = 0;
  int64_t cluster_size_p50 = 0, cluster_size_p90 = 0, cluster_size_p99 = 0;
  int64_t split_clusters[3] = {0, 0, 0};  // clusters with members in train, valid, test
  int64_t split_rounds = 0, clusters_moved = 0, sequences_moved = 0;
};
// Read through the file's handle (data/prepared_data.h), every split's
// offsets and, for a cluster split, the cluster table checked.
DatasetInfo read_dataset_info(const std::string& path);

std::string format_summary(const PrepareSummary& s);
std::string format_info(const DatasetInfo& info);

}  // namespace pf
