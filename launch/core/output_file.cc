#include "launch/core/output_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "runtime/check.h"

namespace pf {

OutputFile::OutputFile(ReplaceableOutput target) : target_(std::move(target)) {
  if (target_.to_stdout()) {
    f_ = stdout;
    return;
  }
  f_ = ::open_memstream(&text_, &size_);
  PF_REQUIRE(IoError, f_ != nullptr, "cannot hold the text of '" << target_.path() << "': " << std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (!target_.to_stdout() && f_) std::fclose(f_);
  std::free(text_);
}  // target_ removes an uncommitted temporary file

void OutputFile::write(const std::string& text) {
  PF_REQUIRE(IoError, std::fwrite(text.data(), 1, text.size(), f_) == text.size(),
             "writing '" << (target_.to_stdout() ? std::string("stdout") : target_.path())
                         << "' failed: " << std::strerror(errno));
}

void OutputFile::finish() {
  if (finished_) return;
  finished_ = true;
  if (target_.to_stdout()) {
    PF_REQUIRE(IoError, std::fflush(f_) == 0 && !std::ferror(f_), "writing stdout failed: " << std::strerror(errno));
    return;
  }
  const std::string& path = target_.path();
  PF_REQUIRE(IoError, std::fflush(f_) == 0 && !std::ferror(f_),
             "holding the text of '" << path << "' failed: " << std::strerror(errno));
  const std::string& tmp = target_.temporary_path();
  std::FILE* out = std::fopen(tmp.c_str(), "w");
  PF_REQUIRE(IoError, out != nullptr, "cannot write '" << path << "' (as " << tmp << "): " << std::strerror(errno));
  const bool written = std::fwrite(text_, 1, size_, out) == size_;
  const int err = errno;
  const bool closed = std::fclose(out) == 0;
  PF_REQUIRE(IoError, written && closed, "writing '" << path << "' failed: " << std::strerror(written ? errno : err));
}

void OutputFile::commit() {
  finish();
  if (!target_.to_stdout()) target_.commit();
}

}  // namespace pf
