// MMseqs2 clustering and search as child processes: see mmseqs.h.
#include "data/mmseqs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "data/vocab.h"
#include "runtime/check.h"
#include "runtime/subprocess.h"
#include "runtime/task_pool.h"

namespace pf {

namespace {

std::string threads_arg(const MmseqsSettings& s) {
  const int n = thread_count(s.threads);
  return std::to_string(n);
}

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}

void run(const std::vector<std::string>& argv, const MmseqsSettings& s, const std::string& log, const char* what) {
  SubprocessOptions o;
  o.log_path = log;
  o.stop_requested = s.stop_requested;
  o.what = what;
  try {
    run_subprocess(argv, o);
  } catch (const SubprocessError& e) {
    if (find_program(s.program).empty())
      throw SubprocessError(std::string(e.what()) + " (MMseqs2 is the Debian package mmseqs2; --mmseqs PATH names " +
                            "another binary)");
    throw;
  }
}

double parse_number(const std::string& field, const std::string& where, const char* name) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  // An underflow (MMseqs2 writes e-values such as 5.377E-319) is a number;
  // an overflow is not.
  const bool overflow = errno == ERANGE && std::fabs(v) == HUGE_VAL;
  PF_REQUIRE(DataError, !field.empty() && end == field.c_str() + field.size() && !overflow,
             where << ": " << name << " '" << field << "' is not a number");
  return v;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

// Calls fn(fields, "<path>:<line>") for each line of a tab-separated table;
// returns the number of lines.
int64_t for_each_table_line(const std::string& path, const char* what,
                            const std::function<void(const std::vector<std::string>&, const std::string&)>& fn) {
  std::ifstream in(path);
  PF_REQUIRE(IoError, in.good(), "cannot open MMseqs2's " << what << " '" << path << "': " << std::strerror(errno));
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    fn(split_tabs(line), path + ":" + std::to_string(lineno));
  }
  return lineno;
}

}  // namespace

std::string sequence_name(int64_t index) { return "s" + std::to_string(index); }

int64_t parse_sequence_index(const std::string& name, int64_t n, const std::string& where) {
  const bool digits = name.size() >= 2 && name.size() <= 19 && name[0] == 's' &&
                      name.find_first_not_of("0123456789", 1) == std::string::npos;
  PF_REQUIRE(DataError, digits, where << ": '" << name << "' is not a sequence name of the form s<index>");
  const int64_t i = std::strtoll(name.c_str() + 1, nullptr, 10);
  PF_REQUIRE(DataError, i < n, where << ": sequence '" << name << "' does not exist (" << n << " sequences)");
  return i;
}

void write_fasta_record(std::ostream& out, int64_t index, const uint8_t* tokens, int64_t n) {
  std::string line;
  line.reserve(static_cast<size_t>(n) + 32);
  line += '>';
  line += sequence_name(index);
  line += '\n';
  for (int64_t i = 0; i < n; ++i) line += Vocab::residue_letter(tokens[i]);
  line += '\n';
  out << line;
}

std::string mmseqs_version(const MmseqsSettings& settings, const std::string& workdir) {
  const std::string log = workdir + "/version.log";
  run({settings.program, "version"}, settings, log, "mmseqs version");
  std::ifstream in(log);
  std::string v;
  std::getline(in, v);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  return v;
}

std::vector<int64_t> parse_cluster_table(const std::string& path, int64_t n) {
  std::vector<int64_t> rep(static_cast<size_t>(n), -1);
  const int64_t lineno = for_each_table_line(path, "cluster table", [&](const auto& f, const std::string& where) {
    PF_REQUIRE(DataError, f.size() == 2,
               where << ": expected 'representative<TAB>member', got " << f.size() << " field(s)");
    const int64_t r = parse_sequence_index(f[0], n, where);
    const int64_t m = parse_sequence_index(f[1], n, where);
    PF_REQUIRE(DataError, rep[static_cast<size_t>(m)] < 0, where << ": sequence '" << f[1] << "' is in two clusters");
    rep[static_cast<size_t>(m)] = r;
  });
  for (int64_t i = 0; i < n; ++i)
    PF_REQUIRE(DataError, rep[static_cast<size_t>(i)] >= 0,
               path << ": sequence '" << sequence_name(i) << "' is in no cluster (" << lineno << " lines for " << n
                    << " sequences)");
  // A representative represents itself: the table names each cluster by it.
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rep[static_cast<size_t>(i)];
    PF_REQUIRE(DataError, rep[static_cast<size_t>(r)] == r,
               path << ": representative '" << sequence_name(r) << "' of '" << sequence_name(i)
                    << "' is itself in the cluster of '" << sequence_name(rep[static_cast<size_t>(r)]) << "'");
  }
  return rep;
}

std::vector<SearchHit> parse_search_table(const std::string& path, int64_t n_query, int64_t n_target) {
  std::vector<SearchHit> hits;
  for_each_table_line(path, "search result", [&](const auto& f, const std::string& where) {
    PF_REQUIRE(DataError, f.size() == 6,
               where << ": expected 6 columns (query target fident qcov tcov evalue), got " << f.size());
    SearchHit h;
    h.query = parse_sequence_index(f[0], n_query, where);
    h.target = parse_sequence_index(f[1], n_target, where);
    h.identity = parse_number(f[2], where, "fident");
    h.query_coverage = parse_number(f[3], where, "qcov");
    h.target_coverage = parse_number(f[4], where, "tcov");
    h.evalue = parse_number(f[5], where, "evalue");
    PF_REQUIRE(DataError, h.identity >= 0 && h.identity <= 1, where << ": fident " << f[2] << " outside [0, 1]");
    hits.push_back(h);
  });
  return hits;
}

std::vector<int64_t> mmseqs_cluster(const std::string& fasta, int64_t n, const ClusterParams& p,
                                    const MmseqsSettings& settings, const std::string& workdir) {
  PF_REQUIRE(ValueError, p.mode == "linclust" || p.mode == "cluster",
             "cluster mode '" << p.mode << "': expected linclust or cluster");
  PF_REQUIRE(ValueError, p.identity > 0 && p.identity <= 1, "cluster identity " << p.identity << " outside (0, 1]");
  PF_REQUIRE(ValueError, p.coverage >= 0 && p.coverage <= 1, "cluster coverage " << p.coverage << " outside [0, 1]");
  const std::string prefix = workdir + "/clu";
  run({settings.program, p.mode == "linclust" ? "easy-linclust" : "easy-cluster", fasta, prefix, workdir + "/tmp",
       "--min-seq-id", fmt(p.identity), "-c", fmt(p.coverage), "--cov-mode", "0", "--threads", threads_arg(settings),
       "-v", "2"},
      settings, workdir + "/cluster.log", "clustering");
  return parse_cluster_table(prefix + "_cluster.tsv", n);
}

std::vector<SearchHit> mmseqs_search(const std::string& query_fasta, int64_t n_query, const std::string& target_fasta,
                                     int64_t n_target, double coverage, double evalue, const MmseqsSettings& settings,
                                     const std::string& workdir) {
  if (n_query == 0 || n_target == 0) return {};
  const std::string out = workdir + "/search.m8";
  run({settings.program, "easy-search", query_fasta, target_fasta, out, workdir + "/tmp", "-c", fmt(coverage),
       "--cov-mode", "2", "-e", fmt(evalue), "--threads", threads_arg(settings), "-v", "2", "--format-output",
       "query,target,fident,qcov,tcov,evalue"},
      settings, workdir + "/search.log", "homology search");
  return parse_search_table(out, n_query, n_target);
}

}  // namespace pf
