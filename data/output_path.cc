// The output-path rule: see output_path.h.
#include "data/output_path.h"

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/h5.h"
#include "data/paths.h"
#include "runtime/atomic_file.h"
#include "runtime/check.h"

namespace pf {

namespace fs = std::filesystem;

PathHolds path_holds(const std::string& path, const OutputKind& kind) {
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (ec || !fs::exists(link)) return PathHolds::Nothing;
  if (fs::is_symlink(link)) return PathHolds::Link;
  if (fs::is_directory(link)) return PathHolds::Folder;
  return fs::is_regular_file(link) && kind.earlier(path) ? PathHolds::Earlier : PathHolds::Other;
}

Destination require_replaceable_output(const std::string& option, const std::string& path, const OutputKind& kind,
                                       const std::vector<std::string>& inputs) {
  if (path.empty() || path == "-") return {};
  const std::string named = option + " '" + path + "'";
  for (const std::string& in : inputs)
    PF_REQUIRE(ConfigError, !same_file(path, in),
               named << " is the same file as the input '" << in << "': refusing to write over it");
  std::error_code ec;
  // The folder must take the file (and its temporary), checked before any work.
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  PF_REQUIRE(ConfigError, fs::is_directory(folder, ec),
             named << ": the folder '" << folder.string() << "' does not exist");
  PF_REQUIRE(ConfigError, ::access(folder.c_str(), W_OK) == 0,
             named << ": cannot write in the folder '" << folder.string() << "': " << std::strerror(errno));
  switch (path_holds(path, kind)) {
    case PathHolds::Nothing: return Destination::of(path);  // a new file
    case PathHolds::Link: {
      // Renaming over a link would replace the link and leave its target as
      // it was: neither what the link's owner nor the user meant.
      const bool to_something = fs::exists(fs::status(path, ec));
      throw ConfigError(named + " is a symbolic link" + (to_something ? " to '" : " to nothing ('") +
                        fs::read_symlink(path, ec).string() + "'" + (to_something ? "" : ")") +
                        ": refusing to replace it; name the file itself or choose another path");
    }
    case PathHolds::Folder:
      throw ConfigError(named + " is a folder: refusing to replace it; give the name of a file for " + kind.what);
    case PathHolds::Other:
      throw ConfigError(named + " exists and is not " + kind.what +
                        " written earlier by this tool: refusing to replace it; remove it or choose another path");
    case PathHolds::Earlier: break;
  }
  PF_REQUIRE(ConfigError, ::access(path.c_str(), W_OK) == 0,
             named << " is write-protected: refusing to replace it; make it writable, or choose another path");
  // In a sticky folder (/tmp) only the owner of a file, or of the folder,
  // may rename over it: known now, not after the work.
  struct stat file_st {}, folder_st {};
  if (::stat(folder.c_str(), &folder_st) == 0 && (folder_st.st_mode & S_ISVTX) && ::stat(path.c_str(), &file_st) == 0 &&
      ::geteuid() != 0 && file_st.st_uid != ::geteuid() && folder_st.st_uid != ::geteuid())
    throw ConfigError(named + " belongs to another user in a folder that only lets owners replace their files "
                              "(sticky): choose another path");
  // HDF5 holds a shared lock on a file while a process has it open (a run
  // reading its data, a tool its checkpoint): replacing it would change that
  // process's file under it (it reopens files by name).
  PF_REQUIRE(ConfigError, !file_in_use(path),
             named << " is open in another process (it holds the file's lock, as a run reading its data "
                      "does): refusing to replace it under that process; wait for it to end, or choose "
                      "another path");
  return Destination::of(path);
}

bool file_starts_with(const std::string& path, const std::string& prefix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string head(prefix.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  return in.gcount() == static_cast<std::streamsize>(prefix.size()) && head == prefix;
}

std::string first_line_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line(64 << 10, '\0');
  in.read(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<size_t>(in.gcount()));
  const size_t end = line.find('\n');
  return end == std::string::npos ? line : line.substr(0, end);
}

bool h5_root_has_attributes(const std::string& path, const std::vector<std::string>& names) {
  static const char kSignature[] = "\x89HDF\r\n\x1a\n";
  if (!file_starts_with(path, std::string(kSignature, 8))) return false;
  h5_quiet();
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return false;
  bool all = true;
  for (const std::string& name : names) all = all && H5Aexists(file, name.c_str()) > 0;
  H5Fclose(file);
  return all;
}

}  // namespace pf
