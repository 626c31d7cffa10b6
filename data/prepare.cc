// FASTA / Swiss-Prot -> HDF5 preparation: see prepare.h.
#include "data/prepare.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>
#include <tuple>

#include "data/cluster_split.h"
#include "data/duplicates.h"
#include "data/empty_split_check.h"
#include "data/family_table.h"
#include "data/h5.h"
#include "data/h5_direct_appender.h"
#include "data/mmseqs.h"
#include "data/output_path.h"
#include "data/prepared_data.h"
#include "data/replaceable_output.h"
#include "data/schema.h"
#include "data/scratch_folder.h"
#include "data/sequence_reader.h"
#include "data/vocab.h"
#include "runtime/atomic_file.h"
#include "runtime/clock.h"
#include "runtime/fnv1a.h"
#include "runtime/memory.h"
#include "runtime/random.h"
#include "runtime/task_pool.h"

namespace pf {

namespace {

constexpr const char* kScratchInfix = ".mmseqs-";  // "<output>.mmseqs-<pid>": MMseqs2's working folder
constexpr const char* kSortInfix = ".sort-";       // "<output>.sort-<pid>": the duplicate sort's runs

uint64_t fnv1a64(const uint8_t* p, int64_t n) { return Fnv1a64().add(p, static_cast<size_t>(n)).value(); }

// One split group being written to extendible datasets: tokens, offsets
// and clusters go to their appenders record by record (full chunks are
// compressed on `pool`'s threads while this one parses on), ids and headers
// in batches.
class SplitWriter {
 public:
  SplitWriter(hid_t file, const char* name, bool clustered, TaskPool* pool)
      : group_(h5_create_group(file, std::string("/") + name)),
        tokens_(group_, "tokens", H5T_NATIVE_UINT8, H5Layout{kTokenChunk, 4, true}, pool),
        offsets_(group_, "offsets", H5T_NATIVE_INT64, H5Layout{kOffsetChunk, 4, true}, pool),
        ids_(group_, "ids", 0, H5Layout{4096, 0, false}),
        headers_(group_, "headers", 0, H5Layout{4096, 0, false}) {
    offsets_.append(&residues_, 1);
    if (clustered)
      clusters_ = std::make_unique<H5DirectAppender>(group_, kClustersName, H5T_NATIVE_INT64,
                                                     H5Layout{kOffsetChunk, 4, true}, pool);
  }
  // cluster: the sequence's index in /clusters; ignored (pass -1) when unclustered.
  void add(const SequenceRecord& rec, int64_t cluster) {
    if (clusters_) {
      clusters_->append(&cluster, 1);
      cluster_digest_.add(&cluster, sizeof cluster);
    }
    const int64_t length = static_cast<int64_t>(rec.tokens.size());
    tokens_.append(rec.tokens.data(), length);
    residues_ += length;
    offsets_.append(&residues_, 1);
    ids_buf_.push_back(rec.id);
    header_buf_.push_back(rec.header);
    digest_.add(&length, sizeof length).add(rec.tokens.data(), rec.tokens.size());
    ++sequences_;
    if (ids_buf_.size() >= 65536) flush_strings();
  }
  void finish() {
    flush_strings();
    tokens_.finish();
    offsets_.finish();
    if (clusters_) clusters_->finish();
    h5_write_attr_int64(group_, "sequences", sequences_);
    h5_write_attr_int64(group_, "residues", residues_);
  }
  SplitCounts counts() const { return {sequences_, residues_}; }
  // Over each sequence's length (int64) and tokens, in file order.
  const Fnv1a64& digest() const { return digest_; }
  // Over each sequence's cluster index (int64), in file order.
  const Fnv1a64& cluster_digest() const { return cluster_digest_; }

 private:
  void flush_strings() {
    ids_.append_strings(ids_buf_);
    headers_.append_strings(header_buf_);
    ids_buf_.clear();
    header_buf_.clear();
  }

  H5Id group_;
  H5DirectAppender tokens_, offsets_;
  H5Appender ids_, headers_;
  std::unique_ptr<H5DirectAppender> clusters_;
  Fnv1a64 cluster_digest_;
  std::vector<std::string> ids_buf_, header_buf_;
  int64_t sequences_ = 0, residues_ = 0;
  Fnv1a64 digest_;
};

// Counts of one pass over the inputs.
struct PassCounts {
  int64_t sequences_read = 0, bytes_read = 0, duplicates_dropped = 0;
};

// Calls fn(record, number) for every record of the inputs, numbered from 0
// in input order, with progress lines labelled `label` and the stop check.
PassCounts for_each_record(const PrepareOptions& opt, const std::string& tmp, const char* label,
                           const std::function<void(const SequenceRecord&, int64_t)>& fn) {
  PassCounts counts;
  SequenceRecord rec;
  int64_t number = 0;
  for (const std::string& input : opt.inputs) {
    SequenceReader reader(input, ReaderOptions{opt.map_unknown_to_x});
    double last = seconds_now();
    auto report = [&](const char* tag) {
      if (!opt.progress) return;
      char line[512];
      std::snprintf(line, sizeof(line), "  %s%s: %lld sequences, %.1f MB read%s\n", label, input.c_str(),
                    static_cast<long long>(reader.records_read()), reader.bytes_read() / 1e6, tag);
      *opt.progress << line << std::flush;
    };
    while (reader.next(rec)) {
      if (opt.stop_requested && opt.stop_requested())
        throw PrepareStopped("prepare of '" + opt.output + "' stopped on request while reading '" + input + "' (" +
                             std::to_string(reader.records_read()) + " sequences read); removed the " +
                             "temporary file '" + tmp + "'");
      fn(rec, number++);
      if ((reader.records_read() & 1023) == 0 && seconds_now() - last > 2.0) {
        last = seconds_now();
        report("");
      }
    }
    report(" (done)");
    counts.sequences_read += reader.records_read();
    counts.bytes_read += reader.bytes_read();
  }
  return counts;
}

// The exact repeats of the inputs, within opt.memory_budget (data/duplicates.h).
struct Duplicates {
  DropList drops;
  PassCounts counts;
  int64_t sort_runs = 0;
};

// Throws PrepareStopped while a sort of `what` runs, once a stop is asked for.
std::function<void()> sort_poll(const PrepareOptions& opt, const std::string& tmp, const std::string& what) {
  if (!opt.stop_requested) return {};
  return [&opt, tmp, what] {
    if (opt.stop_requested())
      throw PrepareStopped("prepare of '" + opt.output + "' stopped on request while sorting " + what +
                           "; removed the temporary file '" + tmp + "'");
  };
}

Duplicates find_duplicates(const PrepareOptions& opt, const std::string& tmp,
                           const std::function<std::string()>& scratch) {
  DuplicateFinder finder(scratch, opt.memory_budget, sort_poll(opt, tmp, "the sequence keys"));
  Duplicates d;
  d.counts = for_each_record(opt, tmp, "scanning ", [&](const SequenceRecord& rec, int64_t) {
    finder.add(sequence_key(rec.tokens.data(), static_cast<int64_t>(rec.tokens.size())));
  });
  d.drops = finder.finish();
  d.counts.duplicates_dropped = d.drops.count();
  d.sort_runs = finder.runs_written();
  return d;
}

// Calls fn(record, index) for each record that is not an exact repeat of an
// earlier one, index counting those from 0; DataError when the inputs no
// longer hold the records that find_duplicates numbered.
void for_each_unique(const PrepareOptions& opt, const std::string& tmp, const char* label, const Duplicates& dups,
                     const std::function<void(const SequenceRecord&, int64_t)>& fn) {
  DropList::Cursor cursor(dups.drops);
  int64_t index = 0;
  const PassCounts counts = for_each_record(opt, tmp, label, [&](const SequenceRecord& rec, int64_t number) {
    if (!cursor.dropped(number)) fn(rec, index++);
  });
  PF_REQUIRE(DataError, counts.sequences_read == dups.counts.sequences_read,
             "the inputs changed while prepare read them: " << counts.sequences_read << " sequences on a later pass, "
                                                            << dups.counts.sequences_read << " on the first");
}

// What the clustering decided, per unique sequence and per cluster.
struct ClusterPlan {
  std::vector<int64_t> cluster;         // per sequence: dense cluster index (order of first member)
  std::vector<int64_t> representative;  // per cluster: its representative's sequence index
  std::vector<uint8_t> split;           // per cluster: 0 train, 1 valid, 2 test
  std::vector<uint8_t> ood;             // per sequence: 1 for /ood
  std::string mmseqs_version;
  ClusterSplitResult result;
};

// Copies the records of `all` (written by write_fasta_record) whose index is
// flagged into `path`; returns how many.
int64_t write_fasta_subset(const std::string& all, const std::vector<uint8_t>& flags, const std::string& path) {
  std::ifstream in(all);
  PF_REQUIRE(IoError, in.good(), "cannot read the scratch file '" << all << "'");
  std::ofstream out(path);
  PF_REQUIRE(IoError, out.good(), "cannot create the scratch file '" << path << "'");
  std::string name, residues;
  int64_t kept = 0;
  while (std::getline(in, name) && std::getline(in, residues)) {
    const int64_t i = parse_sequence_index(name.substr(1), static_cast<int64_t>(flags.size()), all);
    if (!flags[static_cast<size_t>(i)]) continue;
    out << name << '\n' << residues << '\n';
    ++kept;
  }
  out.flush();
  PF_REQUIRE(IoError, out.good(), "cannot write the scratch file '" << path << "': " << std::strerror(errno));
  return kept;
}

// The earliest shared identifier and the places of its first two kept
// records ("a.fasta:12 and b.fasta:3"), from one more pass over the inputs up
// to the second: for a message only, so that the writing pass keeps no
// identifier or place.
std::pair<std::string, std::string> shared_id_example(const PrepareOptions& opt, const std::string& tmp,
                                                      const Duplicates& dups, const IdConflicts& c) {
  DropList::Cursor cursor(dups.drops);
  SequenceRecord rec;
  int64_t number = 0, index = 0;
  std::string id, places;
  for (const std::string& input : opt.inputs) {
    SequenceReader reader(input, ReaderOptions{opt.map_unknown_to_x});
    while (reader.next(rec)) {
      if (opt.stop_requested && opt.stop_requested())
        throw PrepareStopped("prepare of '" + opt.output + "' stopped on request while reading '" + input +
                             "' for a shared identifier; removed the temporary file '" + tmp + "'");
      if (cursor.dropped(number++)) continue;
      const std::string place = input + ":" + std::to_string(rec.line);
      if (index == c.first_index) std::tie(id, places) = std::make_pair(rec.id, place);
      if (index++ == c.second_index) {
        PF_REQUIRE(DataError, rec.id == id,
                   "the inputs changed while prepare read them: '" << rec.id << "' at " << place << " is not '" << id
                                                                   << "' any more");
        return {id, places + " and " + place};
      }
    }
  }
  PF_REQUIRE(DataError, false,
             "the inputs changed while prepare read them: fewer than " << c.second_index + 1 << " sequences kept");
  return {};
}

// The id of unique sequence `index`, from one more pass over the inputs: for
// a message only, so that the first pass keeps no id.
std::string sequence_id(const PrepareOptions& opt, const std::string& tmp, const Duplicates& dups, int64_t index) {
  std::string id;
  for_each_unique(opt, tmp, "naming a family in ", dups, [&](const SequenceRecord& rec, int64_t i) {
    if (i == index) id = rec.id;
  });
  return id;
}

ClusterPlan plan_clusters(const PrepareOptions& opt, const std::string& tmp, const Duplicates& dups,
                          const std::string& scratch) {
  ClusterPlan plan;
  MmseqsSettings mm = opt.mmseqs;
  if (!mm.stop_requested) mm.stop_requested = opt.stop_requested;
  plan.mmseqs_version = mmseqs_version(mm, scratch);
  const std::string all = scratch + "/sequences.fasta";
  std::vector<uint64_t> hash;  // per sequence: FNV-1a of its residues
  // --families: per sequence, the first sequence of its family.
  const std::unique_ptr<FamilyTable> table =
      opt.families.empty() ? nullptr : std::make_unique<FamilyTable>(opt.families);
  std::vector<int64_t> given;
  std::unordered_map<std::string, int64_t> first_of_family;
  {
    std::ofstream out(all);
    PF_REQUIRE(IoError, out.good(), "cannot create the scratch file '" << all << "'");
    for_each_unique(opt, tmp, "reading ", dups, [&](const SequenceRecord& rec, int64_t i) {
      const int64_t n = static_cast<int64_t>(rec.tokens.size());
      if (table) {
        const std::string* family = table->family_of(rec.id);
        PF_REQUIRE(DataError, family != nullptr,
                   (rec.source ? *rec.source : std::string("an input")) << ":" << rec.line << ": '" << rec.id
                                                                       << "' has no family in --families '"
                                                                       << table->path() << "'");
        given.push_back(first_of_family.emplace(*family, i).first->second);
      }
      write_fasta_record(out, i, rec.tokens.data(), n);
      hash.push_back(fnv1a64(rec.tokens.data(), n));
      plan.ood.push_back(is_ood_organism(rec.header, opt.ood_organisms) ? 1 : 0);
    });
    out.flush();
    PF_REQUIRE(IoError, out.good(), "cannot write the scratch file '" << all << "': " << std::strerror(errno));
  }
  const int64_t n = static_cast<int64_t>(hash.size());
  std::vector<int64_t> rep;
  if (table) {
    rep = std::move(given);
    if (opt.progress)
      *opt.progress << "  clusters of " << n << " sequences: the families of '" << table->path() << "'\n"
                    << std::flush;
  } else {
    if (opt.progress)
      *opt.progress << "  clustering " << n << " sequences with mmseqs " << plan.mmseqs_version << " ("
                    << opt.cluster.mode << ", identity " << opt.cluster.identity << ", coverage "
                    << opt.cluster.coverage << ")\n"
                    << std::flush;
    rep = mmseqs_cluster(all, n, opt.cluster, mm, scratch);
  }
  std::vector<int64_t> index_of_rep(static_cast<size_t>(n), -1);
  plan.cluster.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t& c = index_of_rep[static_cast<size_t>(rep[static_cast<size_t>(i)])];
    if (c < 0) {
      c = static_cast<int64_t>(plan.representative.size());
      plan.representative.push_back(rep[static_cast<size_t>(i)]);
    }
    plan.cluster[static_cast<size_t>(i)] = c;
  }
  ClusterSplitInput in;
  in.cluster = plan.cluster;
  in.excluded = plan.ood;
  in.identity = opt.cluster.identity;
  int64_t eligible = 0;
  for (uint8_t o : plan.ood) eligible += o ? 0 : 1;
  in.targets[1] = std::llround(opt.val_fraction * static_cast<double>(eligible));
  in.targets[2] = std::llround(opt.test_fraction * static_cast<double>(eligible));
  for (int64_t r : plan.representative) in.cluster_key.push_back(mix64(opt.seed, hash[static_cast<size_t>(r)]));
  const std::string query = scratch + "/heldout.fasta", target = scratch + "/train.fasta";
  auto search = [&](const std::vector<uint8_t>& q, const std::vector<uint8_t>& t) {
    const int64_t nq = write_fasta_subset(all, q, query), nt = write_fasta_subset(all, t, target);
    if (nq == 0 || nt == 0) return std::vector<SearchHit>{};
    return mmseqs_search(query, n, target, n, opt.cluster.coverage, kLeakSearchEvalue, mm, scratch);
  };
  auto progress = [&](const std::string& line) {
    if (opt.progress) *opt.progress << line << std::flush;
  };
  plan.result = split_clusters(in, search, progress);
  plan.split = plan.result.split;
  require_wanted_splits(opt, in, plan.result, plan.cluster, plan.ood, plan.representative, table.get(),
                        [&](int64_t index) { return sequence_id(opt, tmp, dups, index); });
  return plan;
}

void write_file(const PrepareOptions& opt, const std::string& tmp, PrepareSummary* summary) {
  const bool clustered = opt.cluster.identity > 0;
  // The sort runs' folder, made only when the keys outgrow the budget.
  std::unique_ptr<ScratchFolder> sort_scratch;
  auto sort_folder = [&]() -> std::string {
    if (!sort_scratch)
      sort_scratch = std::make_unique<ScratchFolder>(opt.output + kSortInfix + std::to_string(::getpid()));
    return sort_scratch->path();
  };
  const Duplicates dups = find_duplicates(opt, tmp, sort_folder);
  std::unique_ptr<ScratchFolder> scratch;
  ClusterPlan plan;
  if (clustered) {
    scratch = std::make_unique<ScratchFolder>(opt.output + kScratchInfix + std::to_string(::getpid()));
    plan = plan_clusters(opt, tmp, dups, scratch->path());
  }
  H5Id file = h5_create_file(tmp);
  // This thread parses and makes every HDF5 call; the others compress chunks
  // (and this one too, while it waits for them).
  TaskPool pool(std::max(0, thread_count(opt.threads) - 1));
  std::unique_ptr<SplitWriter> writers[3];
  for (int s = 0; s < 3; ++s) writers[s] = std::make_unique<SplitWriter>(file, kSplitNames[s], clustered, &pool);
  std::unique_ptr<SplitWriter> ood;
  if (!opt.ood_organisms.empty()) ood = std::make_unique<SplitWriter>(file, kOodSplitName, clustered, &pool);
  LengthHistogram lengths;
  int64_t written = 0;
  std::vector<std::string> representative_ids(plan.representative.size());
  std::vector<int64_t> cluster_sizes(plan.representative.size(), 0);
  for (const std::string& name : opt.ood_organisms) summary->ood_matches.emplace_back(name, 0);
  // Half the budget: the drop list may hold the other half.
  IdConflictFinder ids(sort_folder, opt.memory_budget / 2, sort_poll(opt, tmp, "the identifier keys"));
  for_each_unique(opt, tmp, "writing ", dups, [&](const SequenceRecord& rec, int64_t i) {
    const int64_t n = static_cast<int64_t>(rec.tokens.size());
    ids.add(rec.id, i);
    lengths.add(n);
    ++written;
    int64_t cluster = -1;
    if (clustered) {
      PF_REQUIRE(DataError, i < static_cast<int64_t>(plan.cluster.size()),
                 "the inputs changed while prepare read them: more sequences on the second pass than the "
                     << plan.cluster.size() << " of the first");
      cluster = plan.cluster[static_cast<size_t>(i)];
      ++cluster_sizes[static_cast<size_t>(cluster)];
      if (plan.representative[static_cast<size_t>(cluster)] == i)
        representative_ids[static_cast<size_t>(cluster)] = rec.id;
    }
    bool held_out = false;
    if (ood) {
      const std::vector<bool> m = organism_matches(rec.header, opt.ood_organisms);
      for (size_t k = 0; k < m.size(); ++k) {
        summary->ood_matches[k].second += m[k] ? 1 : 0;
        held_out = held_out || m[k];
      }
      summary->without_organism += organism_of(rec.header).empty() ? 1 : 0;
    }
    if (held_out)
      ood->add(rec, cluster);
    else if (clustered)
      writers[plan.split[static_cast<size_t>(cluster)]]->add(rec, cluster);
    else
      writers[split_of(rec.tokens.data(), n, opt.seed, opt.val_fraction, opt.test_fraction)]->add(rec, cluster);
  });
  PF_REQUIRE(DataError, !clustered || written == static_cast<int64_t>(plan.cluster.size()),
             "the inputs changed while prepare read them: " << written << " sequences on the second pass, "
                                                            << plan.cluster.size() << " on the first");
  summary->sequences_read = dups.counts.sequences_read;
  summary->bytes_read = dups.counts.bytes_read;
  summary->duplicates_dropped = dups.counts.duplicates_dropped;
  summary->id_conflicts = ids.finish();
  summary->sort_runs = dups.sort_runs + ids.runs_written();
  if (summary->id_conflicts.names > 0)
    std::tie(summary->shared_id, summary->shared_id_places) = shared_id_example(opt, tmp, dups, summary->id_conflicts);
  // The content digest (docs/data.md): each split's name and digest, in
  // file order, and with clusters each split's cluster column; what a
  // checkpoint records to know its data.
  Fnv1a64 content;
  auto finish = [&](std::unique_ptr<SplitWriter>& w, const char* name, SplitCounts* out) {
    w->finish();
    *out = w->counts();
    content.add(name).add(w->digest().hex());
    if (clustered) content.add(kClustersName).add(w->cluster_digest().hex());
    w.reset();
  };
  for (int s = 0; s < 3; ++s) finish(writers[s], kSplitNames[s], &summary->splits[s]);
  if (ood) {
    finish(ood, kOodSplitName, &summary->ood);
    h5_write_attr_strings(file, "ood_organisms", opt.ood_organisms);
  }
  h5_write_attr_string(file, kSplitRuleAttr, clustered ? kSplitRuleCluster : kSplitRuleSequence);
  if (clustered) {
    H5Id group = h5_create_group(file, std::string("/") + kClustersName);
    h5_write_strings(group, "representatives", representative_ids);
    h5_write_vector(group, "sizes", cluster_sizes);
    h5_write_attr_int64(group, "count", static_cast<int64_t>(cluster_sizes.size()));
    h5_write_attr_string(group, "mode", opt.families.empty() ? opt.cluster.mode : std::string(kGivenFamiliesMode));
    h5_write_attr_double(group, "identity", opt.cluster.identity);
    h5_write_attr_double(group, "coverage", opt.cluster.coverage);
    h5_write_attr_string(group, "mmseqs_version", plan.mmseqs_version);
    h5_write_attr_int64(group, "split_rounds", plan.result.rounds);
    h5_write_attr_int64(group, "clusters_moved_to_train", plan.result.clusters_moved);
    h5_write_attr_int64(group, "sequences_moved_to_train", plan.result.sequences_moved);
    summary->clusters = static_cast<int64_t>(cluster_sizes.size());
    summary->split_rounds = plan.result.rounds;
    summary->clusters_moved = plan.result.clusters_moved;
    summary->sequences_moved = plan.result.sequences_moved;
  }
  h5_write_attr_string(file, kContentDigestAttr, "fnv1a64:" + content.hex());
  h5_write_attr_string(file, "schema", schema_string());
  h5_write_attr_int64(file, "schema_version", kSchemaVersion);
  h5_write_attr_string(file, "vocabulary", Vocab::description());
  h5_write_attr_strings(file, "sources", opt.inputs);
  h5_write_attr_int64(file, "seed", static_cast<int64_t>(opt.seed));
  h5_write_attr_double(file, "val_fraction", opt.val_fraction);
  h5_write_attr_double(file, "test_fraction", opt.test_fraction);
  h5_write_attr_int64(file, "map_unknown_to_x", opt.map_unknown_to_x ? 1 : 0);
  h5_write_attr_int64(file, "sequences_read", summary->sequences_read);
  h5_write_attr_int64(file, "duplicates_dropped", summary->duplicates_dropped);
  file.close();
  summary->lengths = lengths.stats();
  if (opt.stop_requested && opt.stop_requested())
    throw PrepareStopped("prepare of '" + opt.output + "' stopped on request before its final rename; removed the " +
                         "temporary file '" + tmp + "'");
}

// Removes "<output>.tmp-<pid>" regular files and "<output>.mmseqs-<pid>"
// scratch folders whose process no longer exists (kill(pid, 0) fails with
// ESRCH): what a run killed by SIGKILL or a crash leaves. Those of live
// processes, of this process, and any other name are kept. A pid is only
// meaningful on this machine: on a folder shared between hosts, two
// concurrent prepares of one output race anyway.
void remove_stale_temporaries(const std::string& output, std::ostream* progress) {
  namespace fs = std::filesystem;
  const fs::path out(output);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  struct Kind {
    std::string infix;
    fs::file_type type;
  };
  for (const Kind& kind : {Kind{".tmp-", fs::file_type::regular}, Kind{kScratchInfix, fs::file_type::directory},
                           Kind{kSortInfix, fs::file_type::directory}}) {
    const std::string prefix = out.filename().string() + kind.infix;
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = name.substr(prefix.size());
      if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(digits));
      std::error_code type_ec;
      if (pid <= 0 || pid == ::getpid() || it->symlink_status(type_ec).type() != kind.type) continue;
      // Only what prepare left: an HDF5 temporary of a gone process, a folder
      // with the scratch marker that nobody holds. A file or folder of the
      // user's that happens to bear the name stays.
      const std::string p = it->path().string();
      const bool ours = kind.type == fs::file_type::regular ? is_stale_hdf5_temporary(p, pid)
                                                              : ScratchFolder::is_left_over(p) &&
                                                                    ::kill(pid, 0) != 0 && errno == ESRCH;
      if (!ours) continue;
      const std::string stale = output + kind.infix + digits;
      std::error_code rm_ec;
      if (fs::remove_all(it->path(), rm_ec) > 0 && progress)
        *progress << "removed stale temporary " << (kind.type == fs::file_type::regular ? "file" : "folder") << " '"
                  << stale << "' (process " << pid << " is gone)\n"
                  << std::flush;
    }
  }
}

}  // namespace

int split_of(const uint8_t* tokens, int64_t n, uint64_t seed, double val_fraction, double test_fraction) {
  const double u = static_cast<double>(mix64(seed, fnv1a64(tokens, n)) >> 11) * (1.0 / 9007199254740992.0);
  if (u < test_fraction) return 2;
  if (u < test_fraction + val_fraction) return 1;
  return 0;
}

std::string organism_of(const std::string& header) {
  size_t start = std::string::npos;
  for (size_t p = header.find("OS="); p != std::string::npos; p = header.find("OS=", p + 1))
    if (p == 0 || header[p - 1] == ' ') {
      start = p + 3;
      break;
    }
  if (start == std::string::npos) return "";
  // The value ends where the next " XX=" field (two upper-case letters) begins.
  size_t end = header.size();
  for (size_t p = start; p + 3 < header.size(); ++p)
    if (header[p] == ' ' && std::isupper(static_cast<unsigned char>(header[p + 1])) &&
        std::isupper(static_cast<unsigned char>(header[p + 2])) && header[p + 3] == '=') {
      end = p;
      break;
    }
  while (end > start && std::isspace(static_cast<unsigned char>(header[end - 1]))) --end;
  while (start < end && std::isspace(static_cast<unsigned char>(header[start]))) ++start;
  return header.substr(start, end - start);
}

std::vector<bool> organism_matches(const std::string& header, const std::vector<std::string>& names) {
  std::vector<bool> out(names.size(), false);
  if (names.empty()) return out;
  std::string os = organism_of(header);
  if (os.empty()) return out;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  os = lower(os);
  for (size_t i = 0; i < names.size(); ++i) out[i] = !names[i].empty() && os.find(lower(names[i])) != std::string::npos;
  return out;
}

bool is_ood_organism(const std::string& header, const std::vector<std::string>& names) {
  const std::vector<bool> m = organism_matches(header, names);
  return std::find(m.begin(), m.end(), true) != m.end();
}

LengthStats LengthHistogram::stats() const {
  LengthStats s;
  for (const auto& [n, k] : counts_) s.count += k;
  if (s.count == 0) return s;
  // Nearest rank r of p: the smallest length whose cumulative count reaches r.
  auto rank = [&](double p) {
    const int64_t r =
        std::clamp<int64_t>(static_cast<int64_t>(std::ceil(p * static_cast<double>(s.count))), 1, s.count);
    int64_t seen = 0;
    for (const auto& [n, k] : counts_)
      if ((seen += k) >= r) return n;
    return counts_.rbegin()->first;
  };
  for (const auto& [n, k] : counts_) {
    s.residues += n * k;
    if (n > 8192) s.longer_than_8192 += k;
  }
  s.min = counts_.begin()->first;
  s.max = counts_.rbegin()->first;
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  return s;
}

LengthStats length_stats(const std::vector<int64_t>& lengths) {
  LengthHistogram h;
  for (int64_t n : lengths) h.add(n);
  return h.stats();
}

OutputKind prepared_data_kind() {
  return {"a data file of performer-data prepare",
          [](const std::string& path) { return h5_root_has_attributes(path, {"schema", "vocabulary", "sources"}); }};
}

PrepareSummary prepare_dataset(const PrepareOptions& opt) {
  PF_REQUIRE(ValueError, !opt.inputs.empty(), "no input files");
  PF_REQUIRE(ValueError, !opt.output.empty(), "no output file");
  PF_REQUIRE(ValueError, opt.memory_budget >= (int64_t{1} << 20),
             "memory budget of " << opt.memory_budget << " bytes is below the minimum of 1 MiB");
  const int64_t host = host_memory_bytes();
  PF_REQUIRE(ValueError, host == 0 || opt.memory_budget <= host,
             "memory budget (--memory-budget) of " << format_bytes(opt.memory_budget)
                                                   << " is more than this machine's memory (" << format_bytes(host)
                                                   << "): the duplicate table is held in memory up to the budget");
  // A sum of exactly 1 leaves /train empty; val 0 + test 1 puts every sequence in /test.
  PF_REQUIRE(ValueError, opt.val_fraction >= 0 && opt.test_fraction >= 0 && opt.val_fraction + opt.test_fraction <= 1.0,
             "split fractions must be >= 0 and sum to at most 1, got val " << opt.val_fraction << " test "
                                                                           << opt.test_fraction);
  // Every input is checked before the first is read (prepare reads each 2-3 times).
  for (const std::string& in : opt.inputs) {
    sequence_format_of(in);
    require_sequence_file(in);
  }
  ReplaceableOutput output("--output", opt.output, prepared_data_kind(), opt.inputs);
  for (const std::string& name : opt.ood_organisms)
    PF_REQUIRE(ValueError, !name.empty(), "empty --ood-organism name (it would match every organism)");
  PF_REQUIRE(ValueError, opt.families.empty() || opt.cluster.identity > 0,
             "--families '" << opt.families
                            << "' gives the clusters of a cluster split, which needs --cluster-identity > 0 (the "
                               "identity of the leak purge between the splits)");
  PF_REQUIRE(ValueError, opt.families.empty() || std::filesystem::is_regular_file(opt.families),
             "--families: no such file '" << opt.families << "'");
  remove_stale_temporaries(opt.output, opt.progress);
  PrepareSummary summary;
  output.write([&](const std::string& tmp) { write_file(opt, tmp, &summary); });
  return summary;
}

TemporaryDataset::TemporaryDataset(PrepareOptions options) {
  PF_REQUIRE(ValueError, !options.inputs.empty(), "no input files");
  ScratchFolder::sweep_left_overs(kPrefix);
  folder_ = std::make_unique<ScratchFolder>(ScratchFolder::temporary_path(kPrefix));
  std::string name = std::filesystem::path(options.inputs.front()).filename().string();
  if (name.empty()) name = "data";
  path_ = folder_->path() + "/" + name + ".h5";
  options.output = path_;
  summary_ = prepare_dataset(options);  // on an error, folder_ removes the folder
}

TemporaryDataset::~TemporaryDataset() = default;

DatasetInfo read_dataset_info(const std::string& path) {
  const PreparedData data = open_prepared_data(path);
  DatasetInfo info;
  info.path = path;
  info.schema = data.schema();
  info.vocabulary = data.vocabulary();
  info.sources = data.sources();
  info.seed = data.seed();
  info.val_fraction = data.val_fraction();
  info.test_fraction = data.test_fraction();
  info.sequences_read = data.sequences_read();
  info.duplicates_dropped = data.duplicates_dropped();
  info.content_digest = data.content_digest();
  for (int s = 0; s < 3; ++s) {
    const PreparedSplit split = data.open_split(kSplitNames[s]);  // the lengths below come from the offsets
    const std::vector<int64_t> offsets = read_offsets(split);
    std::vector<int64_t> lengths(offsets.size() - 1);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) lengths[i] = offsets[i + 1] - offsets[i];
    info.splits[s] = {static_cast<int64_t>(lengths.size()), offsets.back()};
    info.lengths[s] = length_stats(lengths);
  }
  if (data.has_split(kOodSplitName)) {
    const SplitExtent& ood = data.extent(kOodSplitName);
    info.ood = {ood.sequences, ood.residues};
    info.ood_organisms = data.ood_organisms();
  }
  info.schema_version = data.schema_version();
  info.split_rule = data.split_rule();
  if (data.has_clusters()) {
    const ClusterTable t = data.cluster_table();
    const ClusterParameters& p = t.parameters;
    info.cluster_mode = p.mode;
    info.mmseqs_version = p.mmseqs_version;
    info.cluster_identity = p.identity;
    info.cluster_coverage = p.coverage;
    info.clusters = static_cast<int64_t>(t.sizes.size());
    info.split_rounds = p.split_rounds;
    info.clusters_moved = p.clusters_moved;
    info.sequences_moved = p.sequences_moved;
    const LengthStats sizes = length_stats(t.sizes);  // nearest-rank percentiles of cluster sizes
    info.largest_cluster = sizes.max;
    info.cluster_size_p50 = sizes.p50;
    info.cluster_size_p90 = sizes.p90;
    info.cluster_size_p99 = sizes.p99;
    for (int64_t n : t.sizes) info.singleton_clusters += n == 1 ? 1 : 0;
    for (int s = 0; s < 3; ++s) {
      std::vector<uint8_t> in(t.sizes.size(), 0);
      for (int64_t c : t.members[s]) in[static_cast<size_t>(c)] = 1;
      for (uint8_t f : in) info.split_clusters[s] += f;
    }
  }
  return info;
}

namespace {

std::string format_lengths(const LengthStats& l) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "min %lld, p50 %lld, p90 %lld, p99 %lld, max %lld; %lld longer than 8192",
                static_cast<long long>(l.min), static_cast<long long>(l.p50), static_cast<long long>(l.p90),
                static_cast<long long>(l.p99), static_cast<long long>(l.max),
                static_cast<long long>(l.longer_than_8192));
  return buf;
}

}  // namespace

std::string format_summary(const PrepareSummary& s) {
  std::ostringstream os;
  const int64_t kept = s.splits[0].sequences + s.splits[1].sequences + s.splits[2].sequences + s.ood.sequences;
  os << "sequences read: " << s.sequences_read << " (" << s.bytes_read / 1e6 << " MB)\n"
     << "duplicates dropped: " << s.duplicates_dropped
     << (s.sort_runs > 0 ? " (sorted in " + std::to_string(s.sort_runs) + " runs on disk)" : std::string()) << "\n"
     << "sequences kept: " << kept << ", residues: " << s.lengths.residues << "\n";
  for (int i = 0; i < 3; ++i)
    os << "  " << kSplitNames[i] << ": " << s.splits[i].sequences << " sequences, " << s.splits[i].residues
       << " residues\n";
  if (!s.ood_matches.empty()) {
    os << "  " << kOodSplitName << ": " << s.ood.sequences << " sequences, " << s.ood.residues
       << " residues (held-out organisms:";
    for (const auto& [name, count] : s.ood_matches) os << " '" << name << "' " << count;
    os << ")\n";
    for (const auto& [name, count] : s.ood_matches)
      if (count == 0)
        os << "warning: --ood-organism '" << name << "' matched no sequence (" << s.without_organism
           << " of the kept sequences have no OS= field in their header)\n";
  }
  if (s.id_conflicts.names > 0)
    os << "warning: " << s.id_conflicts.names << " identifier(s) name more than one kept sequence ("
       << s.id_conflicts.sequences << " sequences), first '" << s.shared_id << "' at " << s.shared_id_places
       << "; scores, embeddings and --families rows keyed by these identifiers are ambiguous\n";
  if (s.clusters > 0)
    os << "split by cluster: " << s.clusters << " clusters; leak purge: " << s.split_rounds << " search round(s), "
       << s.clusters_moved << " held-out cluster(s) (" << s.sequences_moved << " sequences) moved to train\n";
  os << "lengths: " << format_lengths(s.lengths) << "\n";
  return os.str();
}

std::string format_info(const DatasetInfo& info) {
  std::ostringstream os;
  os << info.path << "\n  schema: " << info.schema << "\n  vocabulary: " << info.vocabulary << "\n  sources:";
  for (const auto& s : info.sources) os << " " << s;
  os << "\n  seed " << info.seed << ", val_fraction " << info.val_fraction << ", test_fraction " << info.test_fraction
     << "\n  sequences read " << info.sequences_read << ", duplicates dropped " << info.duplicates_dropped
     << "\n  content digest "
     << (info.content_digest.empty() ? "none (prepared by an older version)" : info.content_digest) << "\n";
  if (info.split_rule == kSplitRuleCluster) {
    os << "  split by cluster: " << info.clusters << " clusters (MMseqs2 " << info.mmseqs_version << " "
       << info.cluster_mode << ", identity " << info.cluster_identity << ", coverage " << info.cluster_coverage
       << "); sizes p50 " << info.cluster_size_p50 << ", p90 " << info.cluster_size_p90 << ", p99 "
       << info.cluster_size_p99 << ", max " << info.largest_cluster << "; " << info.singleton_clusters
       << " singletons\n  clusters per split: train " << info.split_clusters[0] << ", valid " << info.split_clusters[1]
       << ", test " << info.split_clusters[2] << "; leak purge: " << info.split_rounds << " search round(s), "
       << info.clusters_moved << " held-out cluster(s) (" << info.sequences_moved << " sequences) moved to train\n";
  } else {
    os << "  split by sequence hash: unclustered"
       << (info.schema_version < kSchemaVersion ? " (schema version " + std::to_string(info.schema_version) + ")" : "")
       << "; near-identical relatives may sit in different splits (performer-data audit measures it)\n";
  }
  for (int i = 0; i < 3; ++i) {
    os << "  " << kSplitNames[i] << ": " << info.splits[i].sequences << " sequences, " << info.splits[i].residues
       << " residues";
    if (info.splits[i].sequences > 0) os << "; lengths " << format_lengths(info.lengths[i]);
    os << "\n";
  }
  if (!info.ood_organisms.empty()) {
    os << "  " << kOodSplitName << ": " << info.ood.sequences << " sequences, " << info.ood.residues
       << " residues; organisms:";
    for (const auto& o : info.ood_organisms) os << " '" << o << "'";
    os << "\n";
  }
  return os.str();
}

}  // namespace pf
