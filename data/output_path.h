// The one rule for every output path of every tool (docs/usage.md, "Output
// paths"): an output is a new file, or replaces a file that is itself an
// earlier output of the same kind. It is never a folder, a symbolic link, one
// of the run's inputs (through any link), or any other existing
// file: a checkpoint, a lock, a data file, a config or a file of the user's.
// A tool does not apply it by hand: its ReplaceableOutput
// (data/replaceable_output.h) checks the path with it and then writes the file
// under a temporary name and renames it into place, replacing only what the
// check saw, so a failed run leaves the old file as it was.
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

// What a path names now, as the rule sees it (a link is itself, never its
// target): nothing, a symbolic link, a folder, an earlier output of `kind`
// (a regular file that kind.earlier recognises), or any other file.
enum class PathHolds { Nothing, Link, Folder, Earlier, Other };
PathHolds path_holds(const std::string& path, const OutputKind& kind);

// The rule: ConfigError naming the option, the path and the reason when
// `path` may not be written as `kind`; "" and "-" (stdout) always pass.
// Returns what the path names now, for the final rename to replace only that
// (TemporaryFile, runtime/atomic_file.h). Writers use ReplaceableOutput,
// which calls it.
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
