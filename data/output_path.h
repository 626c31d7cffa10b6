// The one rule for every output path of every tool (docs/usage.md, "Output
// paths"): an output is a new file, or replaces a file that is itself an
// earlier output of the same kind. It is never a folder, a symbolic link, one
// of the run's inputs (through any link), or any other existing
// file: a checkpoint, a lock, a data file, a config or a file of the user's.
// Outputs are then written under a temporary name and renamed into place
// (runtime/atomic_file.h), so a failed run leaves the old file as it was.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/atomic_file.h"

namespace pf {

// What a tool writes at an output path, and how to recognise an earlier file
// of that kind.
struct OutputKind {
  std::string what;                                  // "a score table", for messages
  std::function<bool(const std::string&)> earlier;  // true for an earlier output of this kind
};

// ConfigError naming the option, the path and the reason when `path` may not
// be written as `kind`; "" and "-" (stdout) always pass. Returns what the
// path names now, for the writer's final rename to replace only that
// (TemporaryFile, runtime/atomic_file.h).
Destination require_replaceable_output(const std::string& option, const std::string& path, const OutputKind& kind,
                                const std::vector<std::string>& inputs = {});

// Recognisers for OutputKind::earlier.
// A regular file whose first bytes are `prefix`.
bool file_starts_with(const std::string& path, const std::string& prefix);
// The first line of a file, without its newline, read up to 64 KiB ("" when
// the file cannot be read).
std::string first_line_of(const std::string& path);
// An HDF5 file whose root group carries every attribute in `names`.
bool h5_root_has_attributes(const std::string& path, const std::vector<std::string>& names);

}  // namespace pf
