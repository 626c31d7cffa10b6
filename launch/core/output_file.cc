#include "launch/core/output_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/atomic_file.h"
#include "runtime/check.h"

namespace pf {

OutputFile::OutputFile(const std::string& path, std::optional<Destination> expected)
    : path_(path), expected_(expected) {
  if (path.empty() || path == "-") {
    path_.clear();
    f_ = stdout;
    return;
  }
  f_ = ::open_memstream(&text_, &size_);
  PF_REQUIRE(IoError, f_ != nullptr, "cannot hold the text of '" << path << "': " << std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (!path_.empty() && f_) std::fclose(f_);
  std::free(text_);
}  // tmp_ removes an uncommitted temporary file

void OutputFile::write(const std::string& text) {
  PF_REQUIRE(IoError, std::fwrite(text.data(), 1, text.size(), f_) == text.size(),
             "writing '" << (path_.empty() ? std::string("stdout") : path_) << "' failed: " << std::strerror(errno));
}

void OutputFile::finish() {
  if (finished_) return;
  finished_ = true;
  if (path_.empty()) {
    PF_REQUIRE(IoError, std::fflush(f_) == 0 && !std::ferror(f_), "writing stdout failed: " << std::strerror(errno));
    return;
  }
  PF_REQUIRE(IoError, std::fflush(f_) == 0 && !std::ferror(f_),
             "holding the text of '" << path_ << "' failed: " << std::strerror(errno));
  tmp_ = std::make_unique<TemporaryFile>(path_, expected_);
  std::FILE* out = std::fopen(tmp_->path().c_str(), "w");
  PF_REQUIRE(IoError, out != nullptr,
             "cannot write '" << path_ << "' (as " << tmp_->path() << "): " << std::strerror(errno));
  const bool written = std::fwrite(text_, 1, size_, out) == size_;
  const int err = errno;
  const bool closed = std::fclose(out) == 0;
  PF_REQUIRE(IoError, written && closed, "writing '" << path_ << "' failed: " << std::strerror(written ? errno : err));
}

void OutputFile::commit() {
  finish();
  if (tmp_) tmp_->commit();
}

}  // namespace pf
