// The --csv output of a benchmark: stdout when the path is empty, else a file
// written under a temporary name and renamed into place by commit() (a
// benchmark that fails leaves no partial CSV under the name): an OutputFile
// over a ReplaceableOutput (data/replaceable_output.h). An existing file is
// replaced only when it is an earlier CSV of the same benchmark (its first
// line is this header), as every output path (data/output_path.h).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "launch/core/output_file.h"

namespace pf::bench {

class CsvOutput {
 public:
  // Checks the path and writes the header. A rank that is not the writer
  // neither checks nor writes (ranks probing one file would see each other's
  // probe as a process holding it); the writer's refusal ends the job.
  CsvOutput(const std::string& path, const std::string& header, bool writer = true);
  std::FILE* file() const { return out_ ? out_->stream() : stdout; }
  void commit();  // on the writer; IoError naming the file when it fails

 private:
  std::unique_ptr<OutputFile> out_;
};

}  // namespace pf::bench
