// Text output of the inference tools: stdout, or a file written under a
// temporary name ("<path>.tmp-<pid>") and renamed into place by commit(), so
// that a failed run never leaves a partial file under the final name (the
// temporary file is removed when the writer is destroyed uncommitted).
#pragma once

#include <cstdio>
#include <functional>
#include <string>

namespace pf {

class OutputFile {
 public:
  explicit OutputFile(const std::string& path);  // "" or "-": stdout; IoError naming the file
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(const std::string& text);  // IoError naming the file
  void commit();                        // flush, close and rename; IoError naming the file

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// "<path>.tmp-<pid>": where an output is written before its rename.
std::string temporary_output_path(const std::string& path);

// Calls write(tmp) for the temporary path, then renames it to `path`; on any
// error the temporary file is removed and the error rethrown.
void write_then_rename(const std::string& path, const std::function<void(const std::string& tmp)>& write);

}  // namespace pf
