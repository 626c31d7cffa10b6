// Writing a file under a temporary name and renaming it into place, so that a
// failed or interrupted write never leaves a partial file under the final
// name. The temporary name is "<path>.tmp-<pid>" (stale ones of dead
// processes can be recognised by it, as performer-data does).
#pragma once

#include <functional>
#include <string>

namespace pf {

// "<path>.tmp-<pid>".
std::string temporary_output_path(const std::string& path);
// Renames tmp to path; IoError naming both (and the reason) when it fails.
void rename_into_place(const std::string& tmp, const std::string& path);
// Calls write(tmp) for the temporary path, then renames it to `path`; on any
// error the temporary file is removed and the error rethrown.
void write_then_rename(const std::string& path, const std::function<void(const std::string& tmp)>& write);

}  // namespace pf
