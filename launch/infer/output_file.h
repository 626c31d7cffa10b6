// Text output of the inference tools: stdout, or a file written under a
// temporary name (runtime/atomic_file.h) and renamed into place by commit(), so
// that a failed run never leaves a partial file under the final name (the
// temporary file is removed when the writer is destroyed uncommitted).
#pragma once

#include <cstdio>
#include <string>

namespace pf {

class OutputFile {
 public:
  explicit OutputFile(const std::string& path);  // "" or "-": stdout; IoError naming the file
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(const std::string& text);  // IoError naming the file
  // Flushes and closes the temporary file (stdout: flushes it); IoError
  // naming the file when that fails. commit() calls it when not done yet.
  void finish();
  void commit();  // finish, then rename into place; IoError naming the file
  std::FILE* stream() const { return f_; }  // for formatted writes; write() checks errors

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool finished_ = false, committed_ = false;
};

}  // namespace pf
