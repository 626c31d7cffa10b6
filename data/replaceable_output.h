// One output file of a tool, from the check of its path to the rename of the
// finished file: the output rule (output_path.h) joined with the write under a
// temporary name (runtime/atomic_file.h), so that no writer does one without
// the other. Every tool's output goes through it: performer-score, -embed,
// -generate, -attn, performer-data prepare, the benchmarks' CSVs and
// synthetic FASTA, the trainer's checkpoints and the lines its metrics file
// drops on resume (docs/usage.md, "Output paths").
//
//   ReplaceableOutput out("--output", path, kind, inputs);  // checked now, before the work
//   ... the work ...
//   out.write([&](const std::string& tmp) { fill tmp });    // renamed into place
//
// or, for a file written in steps, or two outputs renamed one after the other
// only when both are complete: out.temporary_path(), fill it, out.commit().
//
// The constructor is the check: a ConfigError naming the option, the path and
// the reason when the path is an input, a folder, a symbolic link, a file that
// is not an earlier output of `kind`, write-protected, or held open by
// another process, and leaves it as it was. commit() renames the temporary
// file over what the check saw and nothing else: a path that was free is
// taken only if still free; an earlier output only if it is the same file,
// unchanged and not held by another process. Otherwise an IoError names the
// path and the temporary file, which is kept (the run's result is not lost).
// A write that fails (an exception from the fill, or the object destroyed
// before commit) leaves no temporary file and nothing under the final name.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/output_path.h"
#include "runtime/atomic_file.h"

namespace pf {

class ReplaceableOutput {
 public:
  using Flush = TemporaryFile::Flush;

  // A file: `path` checked as the value of `option` ("--output") for `kind`,
  // never one of `inputs`. "" or "-" is refused (ConfigError): standard
  // output cannot take a file of this kind.
  ReplaceableOutput(std::string option, std::string path, const OutputKind& kind,
                    const std::vector<std::string>& inputs = {});
  // A text that may go to standard output: "" or "-" is standard output
  // (to_stdout(); nothing here writes it), any other path a file as above.
  static ReplaceableOutput file_or_stdout(std::string option, std::string path, const OutputKind& kind,
                                          const std::vector<std::string>& inputs = {});
  ~ReplaceableOutput();  // removes a temporary file not committed
  ReplaceableOutput(ReplaceableOutput&&) noexcept;
  ReplaceableOutput& operator=(ReplaceableOutput&&) noexcept;

  const std::string& option() const { return option_; }
  const std::string& path() const { return path_; }
  bool to_stdout() const { return to_stdout_; }

  // The temporary file, "<path>.tmp-<pid>": created (empty, held) on the
  // first call; IoError naming it when it cannot be.
  const std::string& temporary_path();
  // Renames the temporary file into place (see above); Flush::ToDisk fsyncs
  // the file first and its folder after.
  void commit(Flush flush = Flush::No);
  // temporary_path(), fill(it), commit(flush). An exception from fill
  // removes the temporary file and is rethrown.
  void write(const std::function<void(const std::string& tmp)>& fill, Flush flush = Flush::No);

 private:
  ReplaceableOutput(std::string option, std::string path, const OutputKind& kind,
                    const std::vector<std::string>& inputs, bool stdout_allowed);

  std::string option_, path_;
  bool to_stdout_ = false;
  Destination was_;                     // what the path named at the check
  std::unique_ptr<TemporaryFile> tmp_;  // from temporary_path() until commit
  bool committed_ = false;
};

}  // namespace pf
