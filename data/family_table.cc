#include "data/family_table.h"

#include <cstdint>
#include <fstream>
#include <utility>

#include "runtime/check.h"

namespace pf {

FamilyTable::FamilyTable(const std::string& path) : path_(path) {
  std::ifstream in(path);
  PF_REQUIRE(IoError, in.good(), "--families: cannot read '" << path << "'");
  std::unordered_map<std::string, int64_t> line_of;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    PF_REQUIRE(DataError, tab != std::string::npos && tab > 0 && tab + 1 < line.size(),
               path << ":" << number << ": expected 'name<TAB>family', got '" << line << "'");
    std::string name = line.substr(0, tab), family = line.substr(tab + 1);
    PF_REQUIRE(DataError, family.find('\t') == std::string::npos,
               path << ":" << number << ": more than two columns in '" << line << "'");
    const auto [it, added] = family_.emplace(name, family);
    PF_REQUIRE(DataError, added || it->second == family,
               path << ":" << number << ": '" << name << "' is in family '" << family << "' here and in '" << it->second
                    << "' on line " << line_of[name]);
    if (added) line_of.emplace(std::move(name), number);
  }
  PF_REQUIRE(DataError, !in.bad(), "--families: error reading '" << path << "'");
  PF_REQUIRE(DataError, !family_.empty(), "--families: '" << path << "' holds no 'name<TAB>family' line");
}

const std::string* FamilyTable::family_of(const std::string& name) const {
  const auto it = family_.find(name);
  return it == family_.end() ? nullptr : &it->second;
}

}  // namespace pf
