#include "launch/infer/output_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/atomic_file.h"
#include "runtime/check.h"

namespace pf {

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path.empty() || path == "-") {
    f_ = stdout;
    return;
  }
  tmp_ = temporary_output_path(path);
  f_ = std::fopen(tmp_.c_str(), "w");
  PF_REQUIRE(IoError, f_ != nullptr, "cannot write '" << path << "' (as " << tmp_ << "): " << std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (tmp_.empty() || committed_) return;
  if (f_ && !finished_) std::fclose(f_);
  std::error_code ignored;
  std::filesystem::remove(tmp_, ignored);
}

void OutputFile::write(const std::string& text) {
  PF_REQUIRE(IoError, std::fwrite(text.data(), 1, text.size(), f_) == text.size(),
             "writing '" << (tmp_.empty() ? std::string("stdout") : path_) << "' failed: " << std::strerror(errno));
}

void OutputFile::finish() {
  if (finished_) return;
  finished_ = true;
  if (tmp_.empty()) {
    PF_REQUIRE(IoError, std::fflush(f_) == 0 && !std::ferror(f_), "writing stdout failed: " << std::strerror(errno));
    return;
  }
  const bool ok = std::fflush(f_) == 0 && std::fclose(f_) == 0;
  f_ = nullptr;
  PF_REQUIRE(IoError, ok, "writing '" << path_ << "' failed: " << std::strerror(errno));
}

void OutputFile::commit() {
  finish();
  if (!tmp_.empty()) rename_into_place(tmp_, path_);
  committed_ = true;
}

}  // namespace pf
