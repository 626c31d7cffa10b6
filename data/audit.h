// The leakage audit of a data file (`performer-data audit`,
// docs/data.md#the-leakage-audit): every sequence of /valid, /test (and
// /ood when present) is searched with MMseqs2 against /train, and for each
// split the audit counts the sequences whose best training hit reaches each
// identity threshold. Hits count when they cover at least `coverage` of the
// held-out sequence (MMseqs2 -c, --cov-mode 2: query coverage, so a
// held-out fragment of a training protein counts) with e-value <=
// kLeakSearchEvalue:
// the same search the cluster split's purge runs, so a cluster split passes
// its own identity by construction.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "data/mmseqs.h"

namespace pf {

struct AuditOptions {
  std::string path;
  double coverage = -1;  // < 0: the file's clustering coverage, or 0.8 for a sequence split
  std::vector<double> thresholds = {0.3, 0.5, 0.7, 0.9};
  MmseqsSettings mmseqs;
  std::ostream* progress = nullptr;
};

struct AuditSplit {
  std::string name;
  int64_t sequences = 0;
  std::vector<int64_t> with_hit;  // per threshold: sequences whose best training hit is at or above it
  std::vector<double> best;       // per sequence: identity of its best training hit, 0 when none
};

struct AuditResult {
  std::string path, split_rule, mmseqs_version;
  double coverage = 0, evalue = 0;
  int64_t train_sequences = 0;
  std::vector<double> thresholds;
  std::vector<AuditSplit> splits;  // valid, test, then ood when the file has it
};

AuditResult run_audit(const AuditOptions& options);

// A table: one line per split, the count and percentage at each threshold.
std::string format_audit(const AuditResult& r);

// The held-out splits (valid, test; not ood) whose fraction of sequences with
// a hit at or above `identity` exceeds `max_fraction`: "test: 79 of 208
// (38.0 %) at identity >= 0.5" each; empty when the audit passes.
std::vector<std::string> audit_failures(const AuditResult& r, double identity, double max_fraction);

}  // namespace pf
