// The output-path rule (data/output_path.h): a new file, or an earlier output
// of the same kind, and nothing else; every refusal names the option, the path
// and why, and leaves what is there as it was.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "data/h5.h"
#include "data/output_path.h"
#include "runtime/atomic_file.h"
#include "runtime/errors.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

const OutputKind kTable{"a table of this test",
                        [](const std::string& p) { return first_line_of(p) == "name\tvalue"; }};

std::string refusal(const std::string& path, const std::vector<std::string>& inputs = {}) {
  try {
    require_replaceable_output("--output", path, kTable, inputs);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputPath, NewFilesStdoutAndEarlierOutputsPass) {
  test::TempDir dir;
  EXPECT_EQ(refusal(dir.file("new.tsv")), "");
  EXPECT_EQ(refusal(""), "");
  EXPECT_EQ(refusal("-"), "");
  test::write_text(dir.file("old.tsv"), "name\tvalue\na\t1\n");
  EXPECT_EQ(refusal(dir.file("old.tsv")), "");
}

TEST(OutputPath, EverythingElseIsRefusedByName) {
  test::TempDir dir;
  const std::string notes = dir.file("notes.txt"), empty = dir.file("empty.txt");
  test::write_text(notes, "my notes\n");
  test::write_text(empty, "");
  std::filesystem::create_directories(dir.file("folder"));
  std::filesystem::create_symlink(dir.file("gone"), dir.file("dangling"));
  std::filesystem::create_symlink(notes, dir.file("to-notes"));
  {
    H5Id f = h5_create_file(dir.file("ckpt-10.h5"));
    h5_write_attr_int64(f, "step", 10);
  }
  struct Case {
    std::string path, says;
  };
  // A link, even to an earlier output: renaming over it would replace the
  // link and leave its target as it was.
  test::write_text(dir.file("old.tsv"), "name\tvalue\n");
  std::filesystem::create_symlink(dir.file("old.tsv"), dir.file("link.tsv"));
  for (const Case& c : {Case{notes, "exists and is not a table of this test"},
                        Case{empty, "exists and is not a table of this test"},
                        Case{dir.file("to-notes"), "is a symbolic link to '" + notes + "'"},
                        Case{dir.file("link.tsv"), "is a symbolic link to '" + dir.file("old.tsv") + "'"},
                        Case{dir.file("ckpt-10.h5"), "exists and is not a table of this test"},
                        Case{dir.file("folder"), "is a folder"},
                        Case{dir.file("dangling"), "is a symbolic link to nothing ('" + dir.file("gone") + "')"}}) {
    SCOPED_TRACE(c.path);
    const std::string why = refusal(c.path);
    EXPECT_NE(why.find("--output '" + c.path + "'"), std::string::npos) << why;
    EXPECT_NE(why.find(c.says), std::string::npos) << why;
  }
  EXPECT_EQ(test::read_all(notes), "my notes\n");
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("dangling")));
}

// An earlier output that a process holds open (HDF5 keeps a shared lock on
// an open file, as a run reading its data does) or that is write-protected
// is not replaced; nor is anything in a folder that does not take files.
TEST(OutputPath, AFileInUseOrWriteProtectedOrAFolderNotWritableIsRefused) {
  test::TempDir dir;
  const OutputKind h5_kind{"an HDF5 file of this test",
                           [](const std::string& p) { return h5_root_has_attributes(p, {"mine"}); }};
  const std::string path = dir.file("data.h5");
  {
    H5Id f = h5_create_file(path);
    h5_write_attr_int64(f, "mine", 1);
  }
  EXPECT_NO_THROW(require_replaceable_output("--output", path, h5_kind));
  {
    H5Id reader = h5_open_file(path);  // as a training run holds its data file
    try {
      require_replaceable_output("--output", path, h5_kind);
      ADD_FAILURE() << "a file open in HDF5 was replaceable";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("is open in another process"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(require_replaceable_output("--output", path, h5_kind));
  EXPECT_NE(refusal(dir.file("missing/new.tsv")).find("the folder '" + dir.file("missing") + "' does not exist"),
            std::string::npos);
  if (::geteuid() == 0) GTEST_SKIP() << "root writes whatever its permissions say";
  test::write_text(dir.file("ro.tsv"), "name\tvalue\n");
  std::filesystem::permissions(dir.file("ro.tsv"), std::filesystem::perms::owner_read);
  EXPECT_NE(refusal(dir.file("ro.tsv")).find("is write-protected"), std::string::npos);
  std::filesystem::create_directories(dir.file("ro"));
  std::filesystem::permissions(dir.file("ro"), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  EXPECT_NE(refusal(dir.file("ro/new.tsv")).find("cannot write in the folder"), std::string::npos);
  std::filesystem::permissions(dir.file("ro"), std::filesystem::perms::owner_all);
}

TEST(OutputPath, AnInputIsRefusedThroughAnyLinkEvenWhenItLooksLikeAnOutput) {
  test::TempDir dir;
  const std::string in = dir.file("in.tsv");
  test::write_text(in, "name\tvalue\n");  // an earlier output, now an input
  std::filesystem::create_hard_link(in, dir.file("hard.tsv"));
  std::filesystem::create_symlink(in, dir.file("soft.tsv"));
  for (const std::string& out : {in, dir.file("hard.tsv"), dir.file("soft.tsv"), dir.path() + "/./in.tsv"}) {
    SCOPED_TRACE(out);
    const std::string why = refusal(out, {in});
    EXPECT_NE(why.find("same file as the input '" + in + "'"), std::string::npos) << why;
  }
  // Named as an input through the link, the output spelled directly.
  EXPECT_NE(refusal(in, {dir.file("soft.tsv")}).find("same file"), std::string::npos);
  // Neither exists yet: the same spelling after normalisation is still one file.
  EXPECT_NE(refusal(dir.file("x/../new.tsv"), {dir.file("new.tsv")}), "");
}

// A temporary name already taken: a leftover no process holds is removed; one
// that a live process holds open (the same pid in another pid namespace) is
// an IoError, and kept.
TEST(OutputPath, ATemporaryNameIsClaimedOnlyFromLeftovers) {
  test::TempDir dir;
  const std::string tmp = dir.file("out.h5.tmp-7");
  EXPECT_NO_THROW(claim_temporary(tmp));  // nothing there
  test::write_text(tmp, "left over");
  EXPECT_FALSE(file_in_use(tmp));
  EXPECT_NO_THROW(claim_temporary(tmp));
  EXPECT_FALSE(std::filesystem::exists(tmp));
  test::write_text(tmp, "being written");
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  EXPECT_TRUE(file_in_use(tmp));
  try {
    claim_temporary(tmp);
    ADD_FAILURE() << "a held temporary was claimed";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is open in another process"), std::string::npos) << e.what();
  }
  ::close(fd);
  EXPECT_EQ(test::read_all(tmp), "being written");
}

// A TemporaryFile exists from its construction, under "<path>.tmp-<pid>",
// held with a record lock (seen by file_in_use, so never claimed by another
// writer); commit() renames it into place; without commit the destructor
// removes it. A record lock of another description counts as in use.
TEST(OutputPath, ATemporaryFileIsHeldUntilItIsCommittedOrGone) {
  test::TempDir dir;
  const std::string out = dir.file("out.tsv");
  std::string seen;
  {
    TemporaryFile tmp(out);
    seen = tmp.path();
    EXPECT_EQ(seen, temporary_output_path(out));
    EXPECT_TRUE(std::filesystem::exists(seen));
    EXPECT_TRUE(file_in_use(seen));
    EXPECT_THROW(claim_temporary(seen), IoError);
    EXPECT_THROW(TemporaryFile again(out), IoError);  // a second writer of this name and pid
    test::write_text(seen, "abandoned");
  }
  EXPECT_FALSE(std::filesystem::exists(seen));
  EXPECT_FALSE(std::filesystem::exists(out));
  {
    TemporaryFile tmp(out);
    test::write_text(tmp.path(), "kept");
    tmp.commit();
  }
  EXPECT_EQ(test::read_all(out), "kept");
  EXPECT_FALSE(std::filesystem::exists(seen));
  EXPECT_FALSE(file_in_use(out));  // the lock went with the writer
  // A record lock taken with fcntl by another open file description.
  const int fd = ::open(out.c_str(), O_RDWR);
  struct flock hold {};
  hold.l_type = F_RDLCK;
  hold.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fd, F_OFD_SETLK, &hold), 0);
  EXPECT_TRUE(file_in_use(out));
  ::close(fd);
  EXPECT_FALSE(file_in_use(out));
}

// With what the path named at the check, commit() replaces only that: a file
// created, changed or opened (locked) by another process while the run
// worked is left as it is, the error names it and the temporary file, and the
// temporary file (the run's result) is kept.
TEST(OutputPath, TheFinalRenameReplacesOnlyWhatWasChecked) {
  test::TempDir dir;
  const std::string out = dir.file("results.tsv");
  auto refused = [&](const Destination& was, const std::string& why) {
    std::string tmp;
    try {
      TemporaryFile t(out, was);
      tmp = t.path();
      test::write_text(tmp, "the run's result");
      t.commit();
      ADD_FAILURE() << "replaced: " << why;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + out + "' " + why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("this run's result is in '" + tmp + "'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(test::read_all(tmp), "the run's result");
    std::filesystem::remove(tmp);
  };
  // Free at the check; the user saves a file there while the run works.
  const Destination free_then = Destination::of(out);
  EXPECT_FALSE(free_then.exists);
  test::write_text(out, "my own notes");
  refused(free_then, "was created by another process");
  EXPECT_EQ(test::read_all(out), "my own notes");
  // An earlier output at the check, then rewritten by someone else.
  const Destination earlier = Destination::of(out);
  test::write_text(out, "rewritten by another process, longer");
  refused(earlier, "was replaced, changed or removed by another process");
  EXPECT_EQ(test::read_all(out), "rewritten by another process, longer");
  // Unchanged but opened (locked) by another process since.
  const Destination now = Destination::of(out);
  const int fd = ::open(out.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  refused(now, "was opened by another process");
  ::close(fd);
  // Unchanged and free: replaced. Free at the check and still free: taken.
  {
    TemporaryFile t(out, now);
    test::write_text(t.path(), "replaced");
    t.commit();
  }
  EXPECT_EQ(test::read_all(out), "replaced");
  const std::string fresh = dir.file("fresh.tsv");
  {
    TemporaryFile t(fresh, Destination::of(fresh));
    test::write_text(t.path(), "new");
    t.commit();
  }
  EXPECT_EQ(test::read_all(fresh), "new");
}

TEST(OutputPath, RecognisersReadOnlyWhatTheyNeed) {
  test::TempDir dir;
  test::write_text(dir.file("a.txt"), "first line\nsecond\n");
  EXPECT_EQ(first_line_of(dir.file("a.txt")), "first line");
  EXPECT_EQ(first_line_of(dir.file("missing")), "");
  EXPECT_TRUE(file_starts_with(dir.file("a.txt"), "first"));
  EXPECT_FALSE(file_starts_with(dir.file("a.txt"), "first line\nsecond\nand more"));
  {
    H5Id f = h5_create_file(dir.file("d.h5"));
    h5_write_attr_string(f, "schema", "s");
    h5_write_attr_string(f, "vocabulary", "v");
  }
  EXPECT_TRUE(h5_root_has_attributes(dir.file("d.h5"), {"schema", "vocabulary"}));
  EXPECT_FALSE(h5_root_has_attributes(dir.file("d.h5"), {"schema", "sources"}));
  EXPECT_FALSE(h5_root_has_attributes(dir.file("a.txt"), {"schema"}));
  EXPECT_FALSE(h5_root_has_attributes(dir.file("missing"), {}));
}

}  // namespace
}  // namespace pf
