// Text output of the inference tools and benchmarks: standard output, or the
// file of a ReplaceableOutput (data/replaceable_output.h), whose text is held
// in memory, written to its temporary file by finish() and renamed into place
// by commit(). A run that fails, or is stopped by a signal while it computes,
// leaves neither a partial file under the final name nor a temporary file:
// nothing is on disk before finish(), and a temporary file not committed is
// removed when the writer is destroyed.
#pragma once

#include <cstdio>
#include <string>

#include "data/replaceable_output.h"

namespace pf {

class OutputFile {
 public:
  // `target`: checked (ReplaceableOutput::file_or_stdout); standard output
  // when it is "" or "-".
  explicit OutputFile(ReplaceableOutput target);
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
  ReplaceableOutput target_;
  std::FILE* f_ = nullptr;
  char* text_ = nullptr;  // the memory stream's buffer (a file's text until commit)
  size_t size_ = 0;
  bool finished_ = false;
};

}  // namespace pf
