#include "runtime/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/check.h"

namespace pf {

std::string temporary_output_path(const std::string& path) {
  return path + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  PF_REQUIRE(IoError, std::rename(tmp.c_str(), path.c_str()) == 0,
             "cannot rename '" << tmp << "' to '" << path << "': " << std::strerror(errno));
}

void write_then_rename(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = temporary_output_path(path);
  try {
    write(tmp);
    rename_into_place(tmp, path);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace pf
