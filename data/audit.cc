// The leakage audit: see audit.h.
#include "data/audit.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/h5.h"
#include "data/prepared_data.h"
#include "data/schema.h"
#include "data/scratch_folder.h"

namespace pf {

namespace {

// Writes every sequence of one split as s<first + i>; returns how many. The
// tokens are read in blocks of about 64 MiB; the offsets were checked when
// the split was opened (PreparedData::open_split).
int64_t write_split_fasta(const PreparedSplit& split, int64_t first, std::ofstream& out) {
  const std::vector<int64_t> offsets = read_offsets(split);
  const int64_t n = split.extent.sequences;
  std::vector<uint8_t> block;
  constexpr int64_t kBlock = 64 << 20;
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    while (j < n && offsets[static_cast<size_t>(j + 1)] - offsets[static_cast<size_t>(i)] <= kBlock) ++j;
    const int64_t begin = offsets[static_cast<size_t>(i)], count = offsets[static_cast<size_t>(j)] - begin;
    block.resize(static_cast<size_t>(count));
    if (count > 0) h5_read_range(split.tokens, begin, count, block.data());
    for (int64_t k = i; k < j; ++k)
      write_fasta_record(out, first + k, block.data() + (offsets[static_cast<size_t>(k)] - begin),
                         offsets[static_cast<size_t>(k + 1)] - offsets[static_cast<size_t>(k)]);
    i = j;
  }
  return n;
}

std::string percent(int64_t k, int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", n > 0 ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0);
  return buf;
}

}  // namespace

AuditResult run_audit(const AuditOptions& opt) {
  PF_REQUIRE(ValueError, !opt.thresholds.empty(), "audit: no identity thresholds");
  for (double t : opt.thresholds)
    PF_REQUIRE(ValueError, t > 0 && t <= 1, "audit: identity threshold " << t << " outside (0, 1]");
  const PreparedData data = open_prepared_data(opt.path);
  AuditResult r;
  r.path = opt.path;
  r.split_rule = data.split_rule();
  r.thresholds = opt.thresholds;
  std::sort(r.thresholds.begin(), r.thresholds.end());
  r.thresholds.erase(std::unique(r.thresholds.begin(), r.thresholds.end()), r.thresholds.end());
  r.coverage = opt.coverage;
  if (r.coverage < 0) r.coverage = data.has_clusters() ? data.cluster_parameters().coverage : 0.8;
  PF_REQUIRE(ValueError, r.coverage <= 1, "audit: coverage " << r.coverage << " outside [0, 1]");
  r.evalue = kLeakSearchEvalue;
  // Every split's offsets are checked before anything is written or run.
  std::vector<PreparedSplit> splits;  // train, then the held-out ones: valid, test and ood when present
  for (const std::string& name : data.split_names()) splits.push_back(data.open_split(name));
  // Under TMPDIR, else /tmp; removed at the end.
  ScratchFolder dir(ScratchFolder::temporary_path("pf-audit-"));
  r.mmseqs_version = mmseqs_version(opt.mmseqs, dir.path());
  const std::string train = dir.path() + "/train.fasta", held = dir.path() + "/heldout.fasta";
  std::vector<int64_t> first;  // query index of each split's first sequence
  int64_t queries = 0;
  {
    std::ofstream t(train), q(held);
    PF_REQUIRE(IoError, t.good() && q.good(), "audit: cannot create files in '" << dir.path() << "'");
    r.train_sequences = write_split_fasta(splits[0], 0, t);
    for (size_t k = 1; k < splits.size(); ++k) {
      first.push_back(queries);
      AuditSplit s;
      s.name = splits[k].name;
      s.sequences = write_split_fasta(splits[k], queries, q);
      queries += s.sequences;
      r.splits.push_back(std::move(s));
    }
    t.flush();
    q.flush();
    PF_REQUIRE(IoError, t.good() && q.good(),
               "audit: cannot write the sequences to '" << dir.path() << "': " << std::strerror(errno));
  }
  if (opt.progress)
    *opt.progress << "audit: searching " << queries << " held-out sequences against " << r.train_sequences
                  << " training sequences (mmseqs " << r.mmseqs_version << ", coverage " << r.coverage << ", e-value "
                  << r.evalue << ")\n"
                  << std::flush;
  const std::vector<SearchHit> hits =
      mmseqs_search(held, queries, train, r.train_sequences, r.coverage, r.evalue, opt.mmseqs, dir.path());
  std::vector<double> best(static_cast<size_t>(queries), 0.0);
  for (const SearchHit& h : hits)
    best[static_cast<size_t>(h.query)] = std::max(best[static_cast<size_t>(h.query)], h.identity);
  for (size_t s = 0; s < r.splits.size(); ++s) {
    AuditSplit& split = r.splits[s];
    split.best.assign(best.begin() + first[s], best.begin() + first[s] + split.sequences);
    for (double t : r.thresholds)
      split.with_hit.push_back(std::count_if(split.best.begin(), split.best.end(), [t](double b) { return b >= t; }));
  }
  return r;
}

std::string format_audit(const AuditResult& r) {
  std::ostringstream os;
  os << r.path << " (split by " << r.split_rule << "): held-out sequences with a training hit at identity >= t, "
     << "coverage >= " << r.coverage << " of the held-out sequence, e-value <= " << r.evalue << " (mmseqs " << r.mmseqs_version << "; "
     << r.train_sequences << " training sequences)\n";
  os << "  split       sequences";
  for (double t : r.thresholds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "   t >= %-11.2f", t);
    os << buf;
  }
  os << "\n";
  for (const AuditSplit& s : r.splits) {
    char head[64];
    std::snprintf(head, sizeof head, "  %-10s %10lld", s.name.c_str(), static_cast<long long>(s.sequences));
    os << head;
    for (size_t k = 0; k < r.thresholds.size(); ++k) {
      char cell[48];
      std::snprintf(cell, sizeof cell, "   %6lld %-10s", static_cast<long long>(s.with_hit[k]),
                    ("(" + percent(s.with_hit[k], s.sequences) + ")").c_str());
      os << cell;
    }
    os << "\n";
  }
  return os.str();
}

std::vector<std::string> audit_failures(const AuditResult& r, double identity, double max_fraction) {
  std::vector<std::string> out;
  for (const AuditSplit& s : r.splits) {
    if (s.name == kOodSplitName || s.sequences == 0) continue;
    const int64_t k = std::count_if(s.best.begin(), s.best.end(), [identity](double b) { return b >= identity; });
    if (static_cast<double>(k) > max_fraction * static_cast<double>(s.sequences)) {
      std::ostringstream line;
      line << s.name << ": " << k << " of " << s.sequences << " (" << percent(k, s.sequences)
           << ") have a training hit at identity >= " << identity << ", more than the allowed " << max_fraction * 100
           << " %";
      out.push_back(line.str());
    }
  }
  return out;
}

}  // namespace pf
