// Text output of the inference tools and benchmarks: stdout, or a file whose
// text is held in memory, written under a temporary name by finish()
// (runtime/atomic_file.h) and renamed into place by commit(). A run that
// fails, or is stopped by a signal while it computes, leaves neither a
// partial file under the final name nor a temporary file: nothing is on disk
// before finish(), and a temporary file not committed is removed when the
// writer is destroyed.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "runtime/atomic_file.h"

namespace pf {

class OutputFile {
 public:
  // "" or "-": stdout. `expected`: what the path named when it was checked
  // (require_replaceable_output): commit() replaces only that (TemporaryFile).
  explicit OutputFile(const std::string& path, std::optional<Destination> expected = std::nullopt);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(const std::string& text);  // IoError naming the file
  // stdout: flushes it; a file: writes the temporary file. IoError naming the
  // file when that fails. commit() calls it when not done yet.
  void finish();
  void commit();  // finish, then rename into place; IoError naming the file
  std::FILE* stream() const { return f_; }  // for formatted writes; write() checks errors

 private:
  std::string path_;
  std::optional<Destination> expected_;
  std::unique_ptr<TemporaryFile> tmp_;  // from finish()
  std::FILE* f_ = nullptr;
  char* text_ = nullptr;  // the memory stream's buffer (a file's text until commit)
  size_t size_ = 0;
  bool finished_ = false;
};

}  // namespace pf
