// Schema checks of protein data files: see schema.h.
#include "data/schema.h"

#include "data/h5.h"
#include "data/vocab.h"

namespace pf {

std::string split_rule_of(hid_t file) {
  return h5_has_attr(file, kSplitRuleAttr) ? h5_read_attr_string(file, kSplitRuleAttr) : kSplitRuleSequence;
}

std::string schema_string() { return std::string(kSchemaName) + "-v" + std::to_string(kSchemaVersion); }

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
             "'" << path << "' was written with vocabulary '" << vocab << "', this build uses '"
                 << Vocab::description() << "'");
}

}  // namespace pf
