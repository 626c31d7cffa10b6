// The checked handle of a prepared protein data file: see prepared_data.h.
#include "data/prepared_data.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "data/schema.h"
#include "data/vocab.h"

namespace pf {

namespace {

constexpr int64_t kCheckBlock = 1 << 16;  // offsets read per block by check_offsets (512 KiB)

// Schema name and version (1 or 2) and the vocabulary of the root.
void check_schema(hid_t file, const std::string& path) {
  PF_REQUIRE(DataError, h5_has_attr(file, "schema"),
             "'" << path << "' is not a protein data file: no 'schema' attribute (expected " << schema_string() << ")");
  const std::string schema = h5_read_attr_string(file, "schema");
  PF_REQUIRE(DataError, schema.rfind(kSchemaName, 0) == 0,
             "'" << path << "' has schema '" << schema << "', expected '" << schema_string() << "'");
  const int64_t version = h5_has_attr(file, "schema_version") ? h5_read_attr_int64(file, "schema_version") : -1;
  PF_REQUIRE(DataError,
             version >= kOldestSchemaVersion && version <= kSchemaVersion &&
                 schema == std::string(kSchemaName) + "-v" + std::to_string(version),
             "'" << path << "' has schema '" << schema << "' version " << version << ", this build reads versions "
                 << kOldestSchemaVersion << " to " << kSchemaVersion << " ('" << kSchemaName << "-v"
                 << kOldestSchemaVersion << "' to '" << schema_string() << "')");
  const std::string vocab = h5_read_attr_string(file, "vocabulary");
  PF_REQUIRE(DataError, vocab == Vocab::description(),
             "'" << path << "' was written with vocabulary '" << vocab << "', this build uses '" << Vocab::description()
                 << "'");
}

// A root attribute that prepare always writes.
void require_root_attr(hid_t file, const std::string& path, const char* name) {
  PF_REQUIRE(DataError, h5_has_attr(file, name),
             "'" << path << "' lacks the root attribute '" << name << "' (performer-data prepare writes it)");
}

// "fnv1a64:" and 16 hex digits (data/schema.h).
bool is_content_digest(const std::string& d) {
  const std::string prefix = "fnv1a64:";
  return d.size() == prefix.size() + 16 && d.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(d.begin() + static_cast<std::ptrdiff_t>(prefix.size()), d.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// The stored type of a dataset: an integer of `bytes` bytes and `sign`, else a
// DataError naming the file, the dataset and what it holds (HDF5 would
// convert another type silently: -3 in int8 tokens would read as 253).
void require_integer_type(hid_t dset, const std::string& path, const std::string& name, size_t bytes, H5T_sign_t sign) {
  H5Id type(H5Dget_type(dset));
  const bool integer = type.get() >= 0 && H5Tget_class(type.get()) == H5T_INTEGER;
  const size_t size = integer ? H5Tget_size(type.get()) : 0;
  const H5T_sign_t got = integer ? H5Tget_sign(type.get()) : H5T_SGN_ERROR;
  PF_REQUIRE(DataError, integer && size == bytes && got == sign,
             "'" << path << "' " << name << " holds "
                 << (integer ? std::string(got == H5T_SGN_NONE ? "unsigned " : "signed ") + std::to_string(8 * size) +
                                   "-bit integers"
                             : std::string("values that are not integers"))
                 << "; the schema stores " << (sign == H5T_SGN_NONE ? "unsigned " : "signed ") << 8 * bytes
                 << "-bit integers there");
}

// ids and headers: variable-length strings, one per sequence (their length
// before anything is read).
void check_strings(hid_t group, const std::string& path, const std::string& split, const char* name,
                   int64_t sequences) {
  const std::string where = "'" + path + "' /" + split + "/" + name;
  H5Id dset = h5_open_dataset(group, name);
  H5Id type(H5Dget_type(dset));
  PF_REQUIRE(DataError, type.get() >= 0 && H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0,
             where << " does not hold variable-length strings, which the schema stores there");
  const int64_t n = h5_dataset_length(dset);
  PF_REQUIRE(DataError, n == sequences,
             where << " holds " << n << " entries for the split's " << sequences << " sequences");
}

// A split's counts against its datasets, without reading an entry: the
// types, tokens [residues], offsets [sequences + 1], no more sequences than
// residues, both stored as declared, and ids and headers [sequences].
SplitExtent check_split_datasets(hid_t file, const std::string& path, const std::string& split) {
  H5Id group = h5_open_group(file, split);
  H5Id tokens = h5_open_dataset(group, "tokens");
  H5Id offsets = h5_open_dataset(group, "offsets");
  require_integer_type(tokens, path, "/" + split + "/tokens", 1, H5T_SGN_NONE);
  require_integer_type(offsets, path, "/" + split + "/offsets", 8, H5T_SGN_2);
  for (const char* attr : {"sequences", "residues"})
    PF_REQUIRE(
        DataError, h5_has_attr(group, attr),
        "'" << path << "' /" << split << " lacks the attribute '" << attr << "' (performer-data prepare writes it)");
  SplitExtent e;
  e.sequences = h5_read_attr_int64(group, "sequences");
  e.residues = h5_read_attr_int64(group, "residues");
  const int64_t n_off = h5_dataset_length(offsets), n_tok = h5_dataset_length(tokens);
  PF_REQUIRE(DataError, e.sequences >= 0 && n_off == e.sequences + 1 && n_tok == e.residues,
             "'" << path << "' /" << split << ": offsets has " << n_off << " entries and tokens " << n_tok
                 << ", but the group records " << e.sequences << " sequences and " << e.residues
                 << " residues (expected offsets of length sequences+1)");
  // Each sequence holds a residue: a count beyond the residues is refused
  // before a block is read or anything per sequence is allocated.
  PF_REQUIRE(DataError, e.sequences <= e.residues,
             "'" << path << "' /" << split << ": the group records " << e.sequences << " sequences but only "
                 << e.residues << " residues (performer-data prepare writes no empty sequence)");
  // Declared and never written, they would read as fill values: an invented
  // protein of one repeated letter (concat mode trained on it, exit 0).
  h5_require_stored(tokens);
  h5_require_stored(offsets);
  check_strings(group, path, split, "ids", e.sequences);
  check_strings(group, path, split, "headers", e.sequences);
  return e;
}

// Every entry of a split's offsets [sequences + 1], streamed in blocks:
// offsets[0] = 0, each in [0, residues], increasing (no sequence is empty),
// the last = residues.
// Both sample modes rely on it: the concat stream locates proteins by a
// binary search over offsets and would read wrong samples without an error.
void check_offsets(hid_t offsets, const std::string& path, const std::string& split, int64_t sequences,
                   int64_t residues) {
  const std::string where = "'" + path + "' /" + split + "/offsets: ";
  std::vector<int64_t> block;
  int64_t prev = 0;
  for (int64_t first = 0; first <= sequences; first += kCheckBlock) {
    const int64_t n = std::min(kCheckBlock, sequences + 1 - first);
    block.resize(static_cast<size_t>(n));
    h5_read_range(offsets, first, n, block.data());
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = first + k, v = block[static_cast<size_t>(k)];
      PF_REQUIRE(
          DataError, v >= 0 && v <= residues,
          where << "offsets[" << i << "] = " << v << " is outside [0, " << residues << "] (the tokens of the split)");
      PF_REQUIRE(DataError, i > 0 || v == 0, where << "offsets[0] = " << v << ", expected 0");
      PF_REQUIRE(DataError, v >= prev,
                 where << "offsets[" << i << "] = " << v << " is below offsets[" << i - 1 << "] = " << prev
                       << " (offsets must be non-decreasing)");
      PF_REQUIRE(DataError, i == 0 || v > prev,
                 where << "offsets[" << i << "] = offsets[" << i - 1 << "] = " << v << ": sequence " << i - 1
                       << " is empty (performer-data prepare writes no empty sequence)");
      prev = v;
    }
  }
  PF_REQUIRE(
      DataError, prev == residues,
      where << "offsets[" << sequences << "] = " << prev << ", expected " << residues << " (the tokens of the split)");
}

}  // namespace

PreparedData open_prepared_data(const std::string& path) {
  PreparedData d;
  d.path_ = path;
  d.file_ = h5_open_file(path);
  const hid_t file = d.file_.get();
  check_schema(file, path);
  d.schema_ = h5_read_attr_string(file, "schema");
  d.schema_version_ = h5_read_attr_int64(file, "schema_version");
  d.vocabulary_ = h5_read_attr_string(file, "vocabulary");
  d.split_rule_ = h5_has_attr(file, kSplitRuleAttr) ? h5_read_attr_string(file, kSplitRuleAttr) : kSplitRuleSequence;
  PF_REQUIRE(DataError, d.split_rule_ == kSplitRuleSequence || d.split_rule_ == kSplitRuleCluster,
             "'" << path << "' has split_rule '" << d.split_rule_ << "', expected '" << kSplitRuleSequence << "' or '"
                 << kSplitRuleCluster << "'");
  if (h5_has_attr(file, kContentDigestAttr)) {
    d.content_digest_ = h5_read_attr_string(file, kContentDigestAttr);
    PF_REQUIRE(DataError, is_content_digest(d.content_digest_),
               "'" << path << "' has " << kContentDigestAttr << " '" << d.content_digest_
                   << "', expected 'fnv1a64:' and 16 hexadecimal digits");
  }
  for (const char* name :
       {"sources", "seed", "val_fraction", "test_fraction", "map_unknown_to_x", "sequences_read", "duplicates_dropped"})
    require_root_attr(file, path, name);
  d.sources_ = h5_read_attr_strings(file, "sources");
  d.seed_ = h5_read_attr_int64(file, "seed");
  d.val_fraction_ = h5_read_attr_double(file, "val_fraction");
  d.test_fraction_ = h5_read_attr_double(file, "test_fraction");
  d.sequences_read_ = h5_read_attr_int64(file, "sequences_read");
  d.duplicates_dropped_ = h5_read_attr_int64(file, "duplicates_dropped");
  if (h5_has_attr(file, "ood_organisms")) d.ood_organisms_ = h5_read_attr_strings(file, "ood_organisms");
  int64_t sequences = 0;
  for (const char* split : {kSplitNames[0], kSplitNames[1], kSplitNames[2], kOodSplitName}) {
    const bool optional = std::string(split) == kOodSplitName;
    if (optional && !h5_exists(file, split)) continue;
    PF_REQUIRE(DataError, h5_exists(file, split),
               "'" << path << "' has no split '/" << split
                   << "' (a prepared file has /train, /valid and /test, empty or not)");
    d.split_names_.push_back(split);
    d.extents_.push_back(check_split_datasets(file, path, split));
    sequences += d.extents_.back().sequences;
  }
  if (d.has_clusters()) d.cluster_parameters_ = read_cluster_parameters(file, path, sequences);
  return d;
}

bool PreparedData::has_clusters() const { return split_rule_ == kSplitRuleCluster; }

bool PreparedData::has_split(const std::string& split) const {
  return std::find(split_names_.begin(), split_names_.end(), split) != split_names_.end();
}

const SplitExtent& PreparedData::extent(const std::string& split) const {
  const auto it = std::find(split_names_.begin(), split_names_.end(), split);
  PF_REQUIRE(DataError, it != split_names_.end(), "'" << path_ << "' has no split '/" << split << "'");
  return extents_[static_cast<size_t>(it - split_names_.begin())];
}

PreparedSplit PreparedData::open_split(const std::string& split, int64_t cache_bytes) const {
  PreparedSplit s;
  s.name = split;
  s.extent = extent(split);
  H5Id group = h5_open_group(file_, split);
  s.tokens = h5_open_dataset(group, "tokens", cache_bytes);
  s.offsets = h5_open_dataset(group, "offsets", cache_bytes);
  check_offsets(s.offsets, path_, split, s.extent.sequences, s.extent.residues);
  return s;
}

std::vector<int64_t> read_offsets(const PreparedSplit& split) {
  std::vector<int64_t> offsets(static_cast<size_t>(split.extent.sequences + 1));
  h5_read_range(split.offsets, 0, split.extent.sequences + 1, offsets.data());
  return offsets;
}

const ClusterParameters& PreparedData::cluster_parameters() const {
  PF_REQUIRE(DataError, has_clusters(),
             "'" << path_ << "' was split by " << split_rule_ << " hash: it has no clusters (prepare it with "
                 << "--cluster-identity, see docs/data.md)");
  return cluster_parameters_;
}

ClusterTable PreparedData::cluster_table() const { return read_cluster_table(file_, path_, cluster_parameters()); }

std::string PreparedData::split_parameters() const {
  std::ostringstream s;
  if (has_clusters())
    s << "clusters at identity " << cluster_parameters_.identity << " and coverage " << cluster_parameters_.coverage;
  else
    s << "sequence hash";
  s << ", seed " << seed_ << ", valid " << val_fraction_ << ", test " << test_fraction_;
  if (!ood_organisms_.empty()) {
    s << ", held-out organisms";
    for (const std::string& o : ood_organisms_) s << " '" << o << "'";
  }
  return s.str();
}

std::vector<std::string> PreparedData::source_names() const {
  std::vector<std::string> names;
  for (const std::string& s : sources_) names.push_back(std::filesystem::path(s).filename().string());
  return names;
}

}  // namespace pf
