// open_prepared_data (data/prepared_data.h), the one opener of prepared data
// files: a file as prepare writes it opens with its counts and attributes,
// and a copy whose declarations disagree with what it stores (offsets or
// tokens longer or shorter than the group records, offsets declared 2^40
// long, datasets of another type, ids and headers of another length, a
// missing split, group or root attribute, a split rule or digest of another
// form, a cluster split without its table) is refused with a DataError
// naming the file and the dataset or attribute, by the handle and by the
// readers that open through it (`performer-data info`, the loader).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "data/h5.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/prepared_data.h"
#include "data/schema.h"
#include "tests/data/data_test_util.h"
#include "tests/data/h5_test_util.h"

namespace pf {
namespace {

// QUERY.fasta.gz prepared once (sequence-hash split, valid 0.1).
const std::string& query_file() {
  static const test::TempDir dir;  // a function-local static: removed at exit
  static const std::string path = [] {
    PrepareOptions o;
    o.inputs = {test::kQueryFasta};
    o.output = dir.file("query.h5");
    o.val_fraction = 0.1;
    prepare_dataset(o);
    return o.output;
  }();
  return path;
}

TEST(PreparedData, AFileAsPreparedOpensWithItsCountsAndAttributes) {
  const PreparedData d = open_prepared_data(query_file());
  EXPECT_EQ(d.path(), query_file());
  EXPECT_EQ(d.schema(), schema_string());
  EXPECT_EQ(d.schema_version(), kSchemaVersion);
  EXPECT_EQ(d.split_rule(), kSplitRuleSequence);
  EXPECT_FALSE(d.has_clusters());
  EXPECT_EQ(d.content_digest().rfind("fnv1a64:", 0), 0u) << d.content_digest();
  EXPECT_EQ(d.split_names(), (std::vector<std::string>{"train", "valid", "test"}));
  EXPECT_FALSE(d.has_split(kOodSplitName));
  EXPECT_EQ(d.source_names(), std::vector<std::string>{"QUERY.fasta.gz"});
  EXPECT_EQ(d.split_parameters(), "sequence hash, seed 0, valid 0.1, test 0.01");
  const DatasetInfo info = read_dataset_info(query_file());
  for (int s = 0; s < 3; ++s) {
    const PreparedSplit split = d.open_split(kSplitNames[s]);
    EXPECT_EQ(split.extent.sequences, info.splits[s].sequences);
    EXPECT_EQ(split.extent.residues, info.splits[s].residues);
    const std::vector<int64_t> offsets = read_offsets(split);
    ASSERT_EQ(static_cast<int64_t>(offsets.size()), split.extent.sequences + 1);
    EXPECT_EQ(offsets.back(), split.extent.residues);
  }
  EXPECT_GT(info.splits[0].sequences, 0);
  try {
    d.extent(kOodSplitName);
    ADD_FAILURE() << "an absent /ood had an extent";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + query_file() + "' has no split '/ood'"), std::string::npos) << e.what();
  }
  try {
    d.cluster_table();
    ADD_FAILURE() << "a sequence split had a cluster table";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("was split by sequence hash"), std::string::npos) << e.what();
  }
}

// A copy of the prepared file with `edit` applied to it, open for writing.
std::string edited_copy(const test::TempDir& dir, const std::string& name, const std::function<void(hid_t)>& edit) {
  const std::string path = dir.file(name + ".h5");
  std::filesystem::copy_file(query_file(), path, std::filesystem::copy_options::overwrite_existing);
  H5Id f = h5_open_file(path, true);
  edit(f);
  return path;
}

// Replaces <group>/<name> by `values` (of their own type, contiguous).
template <typename T>
void replace(hid_t file, const std::string& group, const std::string& name, const std::vector<T>& values) {
  H5Id g = h5_open_group(file, group);
  ASSERT_GE(H5Ldelete(g, name.c_str(), H5P_DEFAULT), 0);
  h5_write_vector(g, name, values);
}

// what() of the DataError `fn` throws ("" and a failure when it throws none).
std::string data_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a DataError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(PreparedData, DeclaredSizesTypesAndPartsThatDisagreeWithTheFileAreRefusedNamingTheFileAndTheDataset) {
  test::TempDir dir;
  const PreparedData good = open_prepared_data(query_file());
  const SplitExtent train = good.extent("train");
  const std::string n = std::to_string(train.sequences), r = std::to_string(train.residues);
  std::vector<int64_t> offsets;
  std::vector<uint8_t> tokens;
  {
    const PreparedSplit s = good.open_split("train");
    offsets = read_offsets(s);
    tokens.resize(static_cast<size_t>(train.residues));
    h5_read_range(s.tokens, 0, train.residues, tokens.data());
  }
  struct Case {
    std::string name;
    std::function<void(hid_t)> edit;
    std::vector<std::string> says;  // besides the file's name
  };
  const std::vector<Case> cases = {
      {"offsets_longer",
       [&](hid_t f) {
         std::vector<int64_t> o = offsets;
         o.push_back(train.residues);
         replace(f, "train", "offsets", o);
       },
       {"/train: offsets has " + std::to_string(train.sequences + 2) + " entries and tokens " + r,
        "records " + n + " sequences"}},
      {"offsets_shorter",
       [&](hid_t f) { replace(f, "train", "offsets", std::vector<int64_t>(offsets.begin(), offsets.end() - 1)); },
       {"/train: offsets has " + n + " entries", "(expected offsets of length sequences+1)"}},
      {"offsets_declared_huge",
       [&](hid_t f) {
         H5Id g = h5_open_group(f, "train");
         H5Ldelete(g, "offsets", H5P_DEFAULT);
         test::declare_int64_dataset(g, "offsets", hsize_t{1} << 40, 1 << 13);
       },
       {"/train: offsets has 1099511627776 entries", "records " + n + " sequences"}},
      {"tokens_longer",
       [&](hid_t f) {
         std::vector<uint8_t> t = tokens;
         t.push_back(4);
         replace(f, "train", "tokens", t);
       },
       {"/train: offsets has", "tokens " + std::to_string(train.residues + 1), r + " residues"}},
      {"offsets_int32",
       [&](hid_t f) { replace(f, "train", "offsets", std::vector<int32_t>(offsets.begin(), offsets.end())); },
       {"/train/offsets holds signed 32-bit integers; the schema stores signed 64-bit integers there"}},
      {"tokens_float",
       [&](hid_t f) { replace(f, "train", "tokens", std::vector<float>(tokens.begin(), tokens.end())); },
       {"/train/tokens holds values that are not integers"}},
      {"ids_shorter",
       [&](hid_t f) {
         H5Id g = h5_open_group(f, "train");
         std::vector<std::string> ids = h5_read_strings(g, "ids");
         ids.pop_back();
         H5Ldelete(g, "ids", H5P_DEFAULT);
         h5_write_strings(g, "ids", ids);
       },
       {"/train/ids holds " + std::to_string(train.sequences - 1) + " entries for the split's " + n + " sequences"}},
      {"headers_numbers",
       [&](hid_t f) { replace(f, "train", "headers", std::vector<int64_t>(static_cast<size_t>(train.sequences))); },
       {"/train/headers does not hold variable-length strings"}},
      {"no_valid", [](hid_t f) { H5Ldelete(f, "valid", H5P_DEFAULT); }, {"has no split '/valid'"}},
      {"no_sequences_count",
       [](hid_t f) { H5Adelete(H5Id(h5_open_group(f, "test")), "sequences"); },
       {"/test lacks the attribute 'sequences'"}},
      {"no_seed", [](hid_t f) { H5Adelete(f, "seed"); }, {"lacks the root attribute 'seed'"}},
      {"split_rule_organism",
       [](hid_t f) { h5_write_attr_string(f, kSplitRuleAttr, "organism"); },
       {"has split_rule 'organism', expected 'sequence' or 'cluster'"}},
      {"digest_md5",
       [](hid_t f) { h5_write_attr_string(f, kContentDigestAttr, "md5:0123"); },
       {"has content_digest 'md5:0123', expected 'fnv1a64:' and 16 hexadecimal digits"}},
      {"cluster_rule_without_table",
       [](hid_t f) { h5_write_attr_string(f, kSplitRuleAttr, kSplitRuleCluster); },
       {"group /clusters is missing (the file's split_rule is cluster)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = edited_copy(dir, c.name, c.edit);
    std::vector<std::string> says = c.says;
    says.push_back("'" + path + "'");
    LoaderOptions lo;
    lo.files = {path};
    lo.sample_length = 64;
    lo.prefetch = 0;
    const std::vector<std::pair<const char*, std::function<void()>>> readers = {
        {"open_prepared_data", [&] { open_prepared_data(path); }},
        {"read_dataset_info", [&] { read_dataset_info(path); }},
        {"the loader", [&] { DataLoader loader(lo); }}};
    for (const auto& [reader, fn] : readers) {
      const std::string m = data_error_of(fn);
      for (const std::string& piece : says) EXPECT_NE(m.find(piece), std::string::npos) << reader << ": " << m;
    }
  }
}

}  // namespace
}  // namespace pf
