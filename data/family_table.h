// A table of given families for `performer-data prepare --families FILE`:
// the clusters of a cluster split taken from the user (for example the
// families a generator evolved, whose members MMseqs2 cannot regroup below
// about 70 % identity) instead of from MMseqs2's clustering.
//
// The file is text, one line per sequence: its identifier as prepare records
// it (the first word of its FASTA header; sp|AC|NAME or tr|AC|NAME for a
// Swiss-Prot entry), a tab, its family's label; blank lines
// and lines starting with '#' are skipped. A name given twice is an error
// when the labels differ. Errors name the file and the line.
#pragma once

#include <string>
#include <unordered_map>

namespace pf {

class FamilyTable {
 public:
  explicit FamilyTable(const std::string& path);
  // The family of a sequence name, or nullptr when the table has none.
  const std::string* family_of(const std::string& name) const;
  const std::string& path() const { return path_; }
  size_t size() const { return family_.size(); }

 private:
  std::string path_;
  std::unordered_map<std::string, std::string> family_;
};

}  // namespace pf
