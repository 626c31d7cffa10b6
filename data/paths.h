// Whether two paths name one file, for the tools that must never write their
// output over one of their inputs (performer-data prepare, performer-attn,
// performer-train's train.metrics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

// True when `a` and `b` name the same file: the same device and inode when
// both exist (so symbolic links, hard links and spellings such as "./x" or
// "d/../x" are seen through), otherwise the same absolute, normalised path
// (weakly_canonical).
bool same_file(const std::string& a, const std::string& b);

// What a file is, whatever names it: its device and inode.
struct FileIdentity {
  uint64_t device = 0, inode = 0;
  bool operator==(const FileIdentity& o) const { return device == o.device && inode == o.inode; }
};
// The identity of what `path` names, symbolic links followed; false when
// nothing is there.
bool file_identity(const std::string& path, FileIdentity* id);

// A file or folder that an output must never be: an input of the run or a
// file it keeps (a checkpoint, a lock), with what it is ("data.files[0]").
struct GuardedPath {
  std::string path;
  std::string what;
};
// The first of `guarded` that is the file `id` (through any symbolic or hard
// link), or nullptr; entries that do not exist are no file.
const GuardedPath* find_same_file(const FileIdentity& id, const std::vector<GuardedPath>& guarded);

}  // namespace pf
