// ReplaceableOutput (data/replaceable_output.h): the output rule checked when
// the object is made, the file written under a temporary name and renamed over
// what the check saw, and nothing left behind by a write that fails or is
// abandoned.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/replaceable_output.h"
#include "runtime/errors.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

namespace fs = std::filesystem;

const OutputKind kTable{"a table of this test", [](const std::string& p) { return first_line_of(p) == "name\tvalue"; }};

// The names in `folder` other than `keep`: what a write left behind.
std::vector<std::string> left_in(const std::string& folder, const std::vector<std::string>& keep) {
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    bool kept = false;
    for (const std::string& k : keep) kept = kept || k == name;
    if (!kept) left.push_back(name);
  }
  return left;
}

std::string config_error(const std::function<void()>& make) {
  try {
    make();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ReplaceableOutput, AForeignFileIsRefusedNamingTheOptionAndThePathBeforeAnyWork) {
  test::TempDir dir;
  const std::string notes = dir.file("notes.txt");
  test::write_text(notes, "my notes\n");
  const std::string why = config_error([&] { ReplaceableOutput("--table", notes, kTable); });
  EXPECT_NE(why.find("--table '" + notes + "' exists and is not a table of this test"), std::string::npos) << why;
  EXPECT_EQ(test::read_all(notes), "my notes\n");
  EXPECT_EQ(left_in(dir.path(), {"notes.txt"}), std::vector<std::string>{});
  // An input, even one that looks like an earlier output.
  const std::string in = dir.file("in.tsv");
  test::write_text(in, "name\tvalue\n");
  const std::string input = config_error([&] { ReplaceableOutput("--table", in, kTable, {in}); });
  EXPECT_NE(input.find("--table '" + in + "' is the same file as the input"), std::string::npos) << input;
}

TEST(ReplaceableOutput, StandardOutputOnlyWhereTheToolCanWriteIt) {
  for (const std::string path : {"", "-"}) {
    SCOPED_TRACE("'" + path + "'");
    const std::string why = config_error([&] { ReplaceableOutput("--output", path, kTable); });
    EXPECT_NE(why.find("--output '" + path + "': standard output cannot take a table of this test"), std::string::npos)
        << why;
    ReplaceableOutput text = ReplaceableOutput::file_or_stdout("--output", path, kTable);
    EXPECT_TRUE(text.to_stdout());
    EXPECT_THROW(text.temporary_path(), ValueError);
  }
}

TEST(ReplaceableOutput, ANewFileAndAnEarlierOutputAreWrittenWholeUnderTheirName) {
  test::TempDir dir;
  const std::string out = dir.file("t.tsv");
  ReplaceableOutput fresh("--table", out, kTable);
  EXPECT_FALSE(fresh.to_stdout());
  EXPECT_EQ(fresh.path(), out);
  fresh.write([&](const std::string& tmp) {
    EXPECT_EQ(tmp, temporary_output_path(out));
    test::write_text(tmp, "name\tvalue\na\t1\n");
  });
  EXPECT_EQ(test::read_all(out), "name\tvalue\na\t1\n");
  ReplaceableOutput again("--table", out, kTable);
  again.write([](const std::string& tmp) { test::write_text(tmp, "name\tvalue\nb\t2\n"); },
              ReplaceableOutput::Flush::ToDisk);
  EXPECT_EQ(test::read_all(out), "name\tvalue\nb\t2\n");
  EXPECT_EQ(left_in(dir.path(), {"t.tsv"}), std::vector<std::string>{});
  EXPECT_THROW(again.temporary_path(), ValueError);  // written once
}

// A fill that throws, and an output dropped before its commit (a run that
// fails or is stopped): the earlier output is as it was, and no temporary
// file is left; a new path stays free.
TEST(ReplaceableOutput, AFailedOrAbandonedWriteLeavesNoPartialFileAndNoTemporaryFile) {
  test::TempDir dir;
  const std::string earlier = dir.file("old.tsv"), fresh = dir.file("new.tsv");
  test::write_text(earlier, "name\tvalue\nkept\t1\n");
  for (const std::string& out : {earlier, fresh}) {
    SCOPED_TRACE(out);
    ReplaceableOutput failing("--table", out, kTable);
    EXPECT_THROW(failing.write([](const std::string& tmp) {
      test::write_text(tmp, "name\tvalue\npartial");
      throw IoError("the disk is full");
    }),
                 IoError);
    {
      ReplaceableOutput abandoned("--table", out, kTable);
      test::write_text(abandoned.temporary_path(), "name\tvalue\nhalf");
      ReplaceableOutput moved = std::move(abandoned);  // the temporary file goes with the object that holds it
      EXPECT_TRUE(fs::exists(moved.temporary_path()));
    }
    EXPECT_EQ(left_in(dir.path(), {"old.tsv"}), std::vector<std::string>{});
  }
  EXPECT_EQ(test::read_all(earlier), "name\tvalue\nkept\t1\n");
}

// The commit replaces what the check saw and nothing else: an earlier output
// that became a file of the user's, a folder or a link since the check, or a
// free path taken meanwhile, is left as it is; the error names the path and
// the temporary file, which holds the run's result.
TEST(ReplaceableOutput, TheCommitReplacesOnlyWhatWasChecked) {
  test::TempDir dir;
  const std::string out = dir.file("t.tsv");
  struct Change {
    std::string what;
    bool earlier;  // an earlier output at the check, else a free path
    std::function<void()> make;
    std::string says;
  };
  const std::vector<Change> changes = {
      {"a file of the user's", true, [&] { test::write_text(out, "my own notes, not a table\n"); },
       "was replaced, changed or removed by another process"},
      {"a folder", true,
       [&] {
         fs::remove(out);
         fs::create_directory(out);
       },
       "was replaced, changed or removed by another process"},
      {"a link", true,
       [&] {
         fs::remove(out);
         test::write_text(dir.file("target"), "name\tvalue\n");
         fs::create_symlink(dir.file("target"), out);
       },
       "was replaced, changed or removed by another process"},
      {"a new file", false, [&] { test::write_text(out, "created meanwhile\n"); }, "was created by another process"},
  };
  for (const Change& c : changes) {
    SCOPED_TRACE(c.what);
    fs::remove_all(out);
    fs::remove(dir.file("target"));
    if (c.earlier) test::write_text(out, "name\tvalue\nold\t0\n");
    ReplaceableOutput target("--table", out, kTable);
    const std::string tmp = target.temporary_path();
    test::write_text(tmp, "name\tvalue\nnew\t1\n");
    c.make();
    const fs::file_type before = fs::symlink_status(out).type();
    try {
      target.commit();
      ADD_FAILURE() << "replaced " << c.what;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + out + "' " + c.says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("this run's result is in '" + tmp + "'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(fs::symlink_status(out).type(), before);
    EXPECT_EQ(test::read_all(tmp), "name\tvalue\nnew\t1\n");
    fs::remove(tmp);
  }
}

}  // namespace
}  // namespace pf
