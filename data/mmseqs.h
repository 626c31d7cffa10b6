// MMseqs2 as an external program: clustering and search of protein
// sequences for homology-aware splits (docs/data.md#homology-aware-splits).
// Every call runs the real `mmseqs` binary in a working folder given by the
// caller (its temporary files, logs and results stay there), with sequence
// ids "s0", "s1", ... that index the caller's sequences, so that ids in its
// result tables map back exactly. Failures are SubprocessError naming the
// command; malformed result tables are DataError naming the file and line.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace pf {

// The e-value bound of every leak search (the split's purge and the audit):
// MMseqs2's default.
constexpr double kLeakSearchEvalue = 1e-3;

struct MmseqsSettings {
  std::string program = "mmseqs";        // name on PATH or a path
  int threads = 0;                       // 0: the machine's cores
  std::function<bool()> stop_requested;  // polled while mmseqs runs
};

struct ClusterParams {
  double identity = 0.5;          // --min-seq-id
  double coverage = 0.8;          // -c, with --cov-mode 0 (of both sequences) for clustering
  std::string mode = "linclust";  // "linclust" (easy-linclust) or "cluster" (easy-cluster)
};

// One alignment of a search: indices of the query and target sequences, the
// fraction of identical residues over the alignment (MMseqs2's fident), the
// query and target coverage, the e-value.
struct SearchHit {
  int64_t query = 0, target = 0;
  double identity = 0, query_coverage = 0, target_coverage = 0, evalue = 0;
};

// "s<index>" and back; parse_sequence_index throws DataError naming `where`
// for anything else or an index >= n.
std::string sequence_name(int64_t index);
int64_t parse_sequence_index(const std::string& name, int64_t n, const std::string& where);

// Writes one FASTA record ">s<index>\n<letters>\n" for residue tokens.
void write_fasta_record(std::ostream& out, int64_t index, const uint8_t* tokens, int64_t n);

// `mmseqs version`, trimmed ("14-7e284+ds-1+b2").
std::string mmseqs_version(const MmseqsSettings& settings, const std::string& workdir);

// Clusters the n sequences of `fasta` (named s0 .. s<n-1>): the index of each
// sequence's representative. Every sequence must appear exactly once in the
// result (DataError otherwise).
std::vector<int64_t> mmseqs_cluster(const std::string& fasta, int64_t n, const ClusterParams& params,
                                    const MmseqsSettings& settings, const std::string& workdir);

// Searches `query_fasta` (n_query sequences) against `target_fasta`
// (n_target), keeping alignments that cover at least `coverage` of the
// query (-c, --cov-mode 2: a query that is a fragment of a target is a
// hit, whatever part of the target it covers) with e-value <= evalue; no identity filter (the callers
// count thresholds themselves). Returns every hit of the result table.
std::vector<SearchHit> mmseqs_search(const std::string& query_fasta, int64_t n_query, const std::string& target_fasta,
                                     int64_t n_target, double coverage, double evalue, const MmseqsSettings& settings,
                                     const std::string& workdir);

// Parsers of the result tables, exposed for tests: "<rep>\t<member>" lines,
// and "query target fident qcov tcov evalue" lines.
std::vector<int64_t> parse_cluster_table(const std::string& path, int64_t n);
std::vector<SearchHit> parse_search_table(const std::string& path, int64_t n_query, int64_t n_target);

}  // namespace pf
