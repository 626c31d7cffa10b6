// A folder for a tool's temporary files (MMseqs2's inputs, tables and
// working files), removed with everything in it when the object goes: on
// success, on errors and on a stop request alike.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "runtime/check.h"

namespace pf {

class ScratchFolder {
 public:
  // Exactly `path`, emptied first when it exists.
  explicit ScratchFolder(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    PF_REQUIRE(IoError, std::filesystem::create_directories(path_, ec) && !ec,
               "cannot create the scratch folder '" << path_ << "': " << ec.message());
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
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pf
