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
// True when another open file description holds a lock on `path` (HDF5
// keeps one on every file it has open; a scratch folder on its marker): the
// file belongs to a live process, whatever its name says, even one in
// another pid namespace whose pid means nothing here.
bool file_in_use(const std::string& path);
// True for an HDF5 temporary ("<path>.tmp-<pid>", as write_then_rename names
// it) that a process of `pid` left and nobody uses: `pid` is a possible pid
// (<= the kernel's pid_max) of no process here (ESRCH; EPERM is another
// user's), no process holds the file open, and it holds HDF5's signature or,
// killed before HDF5 wrote its superblock, zero bytes at its start. What
// prepare and the trainer remove; anything else there is the user's.
bool is_stale_hdf5_temporary(const std::string& path, long pid);
// Makes `tmp` free for this process to write: absent, or removed when it is
// a leftover that no process has open. IoError naming it when a live process
// holds it (a process of the same pid in another pid namespace, writing the
// same output): never written over.
void claim_temporary(const std::string& tmp);
// Renames tmp to path; IoError naming both (and the reason) when it fails.
void rename_into_place(const std::string& tmp, const std::string& path);
// Calls write(tmp) for the temporary path, then renames it to `path`; on any
// error the temporary file is removed and the error rethrown.
void write_then_rename(const std::string& path, const std::function<void(const std::string& tmp)>& write);

}  // namespace pf
