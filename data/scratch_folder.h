// A folder for a tool's temporary files (MMseqs2's inputs, tables and
// working files), removed with everything in it when the object goes: on
// success, on errors and on a stop request alike. It holds a marker file
// (kMarker), by which a later run recognises a scratch folder left by a
// process that died: a folder without it is never emptied or removed.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "runtime/atomic_file.h"
#include "runtime/check.h"

namespace pf {

class ScratchFolder {
 public:
  static constexpr const char* kMarker = ".performer-scratch";
  // Exactly `path`: created, or used when it is empty, or emptied when it is
  // a scratch folder (it holds kMarker); any other folder there is an
  // IoError, left as it is.
  explicit ScratchFolder(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    bool usable = false;  // an empty folder (not a link), used as it is (its mode kept)
    if (std::filesystem::exists(std::filesystem::symlink_status(path_, ec))) {
      usable = std::filesystem::is_directory(std::filesystem::symlink_status(path_, ec)) &&
               std::filesystem::is_empty(path_, ec);
      PF_REQUIRE(IoError, usable || is_left_over(path_),
                 "'" << path_ << "' exists and is not a scratch folder left by this tool (no " << kMarker
                     << " in it, or a live process holds it): refusing to empty it");
      if (!usable) std::filesystem::remove_all(path_, ec);
    }
    PF_REQUIRE(IoError, usable || (std::filesystem::create_directories(path_, ec) && !ec),
               "cannot create the scratch folder '" << path_ << "': " << ec.message());
    // The marker stays open and locked while the folder is in use, so that
    // no other process takes it for a leftover (runtime/atomic_file.h). It is
    // locked under another name and then renamed, so that it never shows
    // unlocked to a sweep of leftovers (sweep_left_overs).
    const std::string unlocked = path_ + "/" + kMarker + ".new";
    marker_ = ::open(unlocked.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    PF_REQUIRE(IoError,
               marker_ >= 0 && ::flock(marker_, LOCK_EX) == 0 &&
                   ::rename(unlocked.c_str(), (path_ + "/" + kMarker).c_str()) == 0,
               "cannot write in the scratch folder '" << path_ << "': " << std::strerror(errno));
  }
  // A folder (not a link) holding kMarker.
  static bool is_scratch_folder(const std::string& path) {
    std::error_code ec;
    return std::filesystem::is_directory(std::filesystem::symlink_status(path, ec)) &&
           std::filesystem::is_regular_file(std::filesystem::path(path) / kMarker, ec);
  }
  // A scratch folder whose owner is gone: its marker is no longer locked.
  static bool is_left_over(const std::string& path) {
    return is_scratch_folder(path) && !file_in_use((std::filesystem::path(path) / kMarker).string());
  }
  // Removes every "<TMPDIR, else /tmp>/<prefix>*" that is a left-over scratch
  // folder (its marker no longer locked: its process died, even by SIGKILL);
  // anything else of that name is kept. Returns how many were removed.
  static int sweep_left_overs(const std::string& prefix) {
    std::error_code ec;
    int removed = 0;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0 || !is_left_over(e.path().string())) continue;
      std::error_code rm;
      if (std::filesystem::remove_all(e.path(), rm) > 0 && !rm) ++removed;
    }
    return removed;
  }
  // A fresh "<TMPDIR, else /tmp>/<prefix>XXXXXX".
  static std::string temporary_path(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    PF_REQUIRE(IoError, ::mkdtemp(tmpl.data()) != nullptr,
               "cannot create a temporary folder from '" << tmpl << "': " << std::strerror(errno));
    return tmpl;
  }
  ~ScratchFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (marker_ >= 0) ::close(marker_);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int marker_ = -1;
};

}  // namespace pf
