// Writing a file under a temporary name and renaming it into place, so that a
// failed or interrupted write never leaves a partial file under the final
// name. The temporary name is "<path>.tmp-<pid>" (stale ones of dead
// processes can be recognised by it, as performer-data does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pf {

// "<path>.tmp-<pid>".
std::string temporary_output_path(const std::string& path);
// True when another open file description holds a lock on `path`: a flock
// (HDF5 keeps one on every file it has open; a scratch folder on its marker)
// or a record lock (fcntl; every TemporaryFile holds one): the file belongs to
// a live process, whatever its name says, even one in another pid namespace
// whose pid means nothing here. The flock is probed by taking it for a
// moment; a probe that meets another's probe tries again. A file that a
// process has open without any lock is not seen.
bool file_in_use(const std::string& path);
// True for an HDF5 temporary ("<path>.tmp-<pid>", as TemporaryFile names
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
// What a path named when a tool checked it: nothing, or one file (its device,
// inode, size and modification time; a link is itself, not its target).
struct Destination {
  bool exists = false;
  uint64_t dev = 0, ino = 0;
  int64_t size = 0, mtime_ns = 0;
  static Destination of(const std::string& path);
  bool operator==(const Destination& o) const {
    return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const Destination& o) const { return !(*this == o); }
};

// The temporary file of one write of `path`: claimed (claim_temporary),
// created empty (O_EXCL) and held with a record lock until the object ends,
// so that file_in_use sees a live writer whatever locking the library that
// fills it uses (HDF5 with HDF5_USE_FILE_LOCKING=FALSE takes none). commit()
// renames it into place; otherwise the destructor removes it. Tools do not
// use it alone: data/replaceable_output.h joins it with the output rule.
//
// With `expected` (what the path named when the tool checked it, before its
// work), commit() replaces only that: a path that was free is taken without
// replacing anything (rename with RENAME_NOREPLACE), and a file that was
// there must be the same file, unchanged and not held by another process
// (file_in_use). Otherwise an IoError says so and names the temporary file,
// which is kept: the run's result is not lost, and nothing the user made or
// another process uses while the run worked is replaced.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& path, std::optional<Destination> expected = std::nullopt);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::string& path() const { return tmp_; }
  // rename_into_place(path(), the final path). Flush::ToDisk first fsyncs the
  // file (IoError naming it when that fails) and after the rename its folder
  // (as far as the filesystem allows): a crash at any point leaves the old
  // file or the new one, complete.
  enum class Flush { No, ToDisk };
  void commit(Flush flush = Flush::No);

 private:
  std::string final_, tmp_;
  std::optional<Destination> expected_;
  int fd_ = -1;
  bool committed_ = false, kept_ = false;
};
// Renames tmp to path; IoError naming both (and the reason) when it fails.
void rename_into_place(const std::string& tmp, const std::string& path);

}  // namespace pf
