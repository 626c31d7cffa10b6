// The schema's name as written: see schema.h.
#include "data/schema.h"

namespace pf {

std::string schema_string() { return std::string(kSchemaName) + "-v" + std::to_string(kSchemaVersion); }

}  // namespace pf
