// Same-file test: see paths.h.
#include "data/paths.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace pf {

bool same_file(const std::string& a, const std::string& b) {
  FileIdentity ia, ib;
  if (file_identity(a, &ia) && file_identity(b, &ib)) return ia == ib;
  std::error_code ea, eb;
  const std::filesystem::path ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a), ea);
  const std::filesystem::path cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b), eb);
  return !ea && !eb && ca == cb;
}

bool file_identity(const std::string& path, FileIdentity* id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  id->device = static_cast<uint64_t>(st.st_dev);
  id->inode = static_cast<uint64_t>(st.st_ino);
  return true;
}

const GuardedPath* find_same_file(const FileIdentity& id, const std::vector<GuardedPath>& guarded) {
  for (const GuardedPath& g : guarded) {
    FileIdentity other;
    if (file_identity(g.path, &other) && other == id) return &g;
  }
  return nullptr;
}

}  // namespace pf
