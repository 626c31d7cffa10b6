// HDF5 helpers: round trips of arrays, ranges, strings, appenders and
// attributes, and errors that carry HDF5's error stack and the file name.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <utility>

#include "data/h5.h"
#include "runtime/random.h"
#include "tests/data/data_test_util.h"
#include "tests/data/h5_test_util.h"
#include "tests/support/error_message.h"

namespace pf {
namespace {

TEST(H5, ArraysRangesStringsAndAttributesRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("a.h5");
  const KeyedRandom rng(11, 0, 0);
  std::vector<float> w(6 * 7);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(rng.uniform(i));
  std::vector<int64_t> big(100000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(rng.draw(i).v[1]) - (1ll << 31);
  {
    H5Id f = h5_create_file(path);
    H5Id g = h5_create_group(f, "model");
    h5_write_array(g, "w", w.data(), {6, 7});
    h5_write_vector(g, "big", big, H5Layout{4096, 4, true});
    h5_write_strings(f, "names", {"alpha", "", "gamma \xCE\xB3"});
    {
      H5Appender app(f, "grow", H5T_NATIVE_UINT8, H5Layout{16, 1, false});
      const std::vector<uint8_t> a{1, 2, 3}, b(40, 9);
      app.append_raw(a.data(), 3);
      app.append_raw(b.data(), 40);
    }
    h5_write_attr_string(f, "s", "text");
    h5_write_attr_int64(g, "step", -42);
    h5_write_attr_int64s(g, "shape", {3, 4, 5});
    h5_write_attr_strings(f, "list", {"x", "yz"});
    h5_write_attr_double(f, "lr", 0.125);
    g.close();  // a written file closes only once nothing of it is open
    f.close();
  }
  H5Id f = h5_open_file(path);
  std::vector<int64_t> shape;
  EXPECT_EQ(h5_read_array<float>(f, "model/w", &shape), w);
  EXPECT_EQ(shape, (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(h5_read_array<int64_t>(f, "model/big"), big);
  H5Id d = h5_open_dataset(f, "model/big");
  std::vector<int64_t> part(777);
  h5_read_range(d, 54321, 777, part.data());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), big.begin() + 54321));
  EXPECT_EQ(h5_read_strings(f, "names"), (std::vector<std::string>{"alpha", "", "gamma \xCE\xB3"}));
  const std::vector<uint8_t> grow = h5_read_array<uint8_t>(f, "grow");
  ASSERT_EQ(grow.size(), 43u);
  EXPECT_EQ(grow[2], 3);
  EXPECT_EQ(grow[42], 9);
  EXPECT_EQ(h5_read_attr_string(f, "s"), "text");
  H5Id g = h5_open_group(f, "model");
  EXPECT_EQ(h5_read_attr_int64(g, "step"), -42);
  EXPECT_EQ(h5_read_attr_int64s(g, "shape"), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(h5_read_attr_strings(f, "list"), (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(h5_read_attr_double(f, "lr"), 0.125);
  EXPECT_TRUE(h5_exists(f, "model/w"));
  EXPECT_FALSE(h5_exists(f, "model/nothing/deeper"));
  EXPECT_THROW(h5_read_range(d, 99999, 2, part.data()), Hdf5Error);
  // A list where one value is expected: the message names the file.
  const std::string w3 = test::expect_error_of<Hdf5Error>([&] { h5_read_attr_int64(g, "shape"); });
  EXPECT_NE(w3.find("attribute 'shape' in " + path + " holds 3 values, expected 1"), std::string::npos) << w3;
  const std::string wl = test::expect_error_of<Hdf5Error>([&] { h5_read_attr_double(f, "list"); });
  EXPECT_NE(wl.find("attribute 'list' in " + path + " holds 2 values, expected 1"), std::string::npos) << wl;
}

TEST(H5, CheckMacroCarriesTheErrorStack) {
  h5_quiet();
  try {
    PF_H5_CHECK(H5Gopen2(-1, "nowhere", H5P_DEFAULT));
    FAIL() << "no throw";
  } catch (const Hdf5Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("H5Gopen2(-1, \"nowhere\""), std::string::npos) << what;
    EXPECT_NE(what.find("H5Gopen2: "), std::string::npos) << what;  // the stack, walked by H5Ewalk2
    EXPECT_NE(what.find("test_h5.cc:"), std::string::npos) << what;
  }
}

TEST(H5, OpenErrorsNameTheFile) {
  test::TempDir dir;
  EXPECT_THROW(h5_open_file(dir.file("missing.h5")), IoError);
  test::write_text(dir.file("not.h5"), "this is not HDF5");
  try {
    h5_open_file(dir.file("not.h5"));
    FAIL() << "no throw";
  } catch (const Hdf5Error& e) {
    EXPECT_NE(std::string(e.what()).find("not.h5"), std::string::npos) << e.what();
  }
  H5Id f = h5_create_file(dir.file("x.h5"));
  try {
    h5_open_dataset(f, "absent");
    FAIL() << "no throw";
  } catch (const Hdf5Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
  }
}

// What is not a regular file is refused by name before HDF5 opens it: a
// FIFO would block the open until some writer came (for ever).
TEST(H5, AFolderOrAFifoIsNotOpened) {
  test::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo.h5").c_str(), 0600), 0);
  for (const auto& [name, says] : {std::pair<std::string, std::string>{"fifo.h5", "is a FIFO, not an HDF5 file"},
                                   {"", "is a folder, not an HDF5 file"}}) {
    try {
      h5_open_file(dir.file(name));
      ADD_FAILURE() << "opened " << name;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// A chunk above kH5MaxChunkBytes (every read would inflate all of it: a small
// deflated file, gigabytes in memory) and a shape other than the one its
// metadata implies are refused before a read allocates anything.
TEST(H5, OversizedChunksAndUnexpectedShapesAreRefused) {
  test::TempDir dir;
  const std::string path = dir.file("big_chunk.h5");
  const int64_t n = kH5MaxChunkBytes / 8 + 1024;  // int64: just above the bound in one chunk
  {
    H5Id f = h5_create_file(path);
    h5_write_vector(f, "one_chunk", std::vector<int64_t>(static_cast<size_t>(n), 0), H5Layout{n, 1, false});
    h5_write_vector(f, "small", std::vector<int64_t>(10, 1), H5Layout{4, 1, false});
  }
  H5Id f = h5_open_file(path);
  try {
    h5_read_array<int64_t>(f, "one_chunk");
    ADD_FAILURE() << "read a chunk of " << n * 8 << " bytes";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/one_chunk in " + path + " is stored in chunks of " + std::to_string(n * 8) +
                                         " bytes, above the " + std::to_string(kH5MaxChunkBytes)),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(h5_read_array<int64_t>(f, "small").size(), 10u);
  EXPECT_NO_THROW(h5_require_shape(h5_open_dataset(f, "small"), {10}, "ten"));
  EXPECT_NO_THROW(h5_require_shape(h5_open_dataset(f, "small"), {-1}, "any length"));
  try {
    h5_require_shape(h5_open_dataset(f, "small"), {3}, "one per cluster, count");
    ADD_FAILURE() << "shape [10] passed for [3]";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/small in " + path + " has shape [10], expected [3] (one per cluster, count)"),
              std::string::npos)
        << e.what();
  }
}

// A dataset declared larger than was ever written (read, it would give its
// fill value): refused by every whole read, before its size is allocated
// (2^36 int64 would be 512 GiB: an allocation would end in bad_alloc, not in
// this DataError), naming the dataset, the file and what is stored.
TEST(H5, DatasetsDeclaredButNotWrittenAreRefusedBeforeTheyAreRead) {
  test::TempDir dir;
  const std::string path = dir.file("holes.h5");
  {
    H5Id f = h5_create_file(path);
    auto create = [&](const char* name, hsize_t n, hsize_t chunk) {
      return test::declare_int64_dataset(f, name, n, chunk);
    };
    create("huge", hsize_t{1} << 36, 1 << 20);
    create("contiguous", 1000, 0);
    H5Id partial = create("partial", 4096, 1024);
    // 3 of its 4 chunks written: [0, 3072).
    std::vector<int64_t> v(3072, 7);
    const hsize_t start = 0, count = 3072;
    H5Id fspace(H5Dget_space(partial));
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    H5Id mspace(H5Screate_simple(1, &count, nullptr));
    ASSERT_GE(H5Dwrite(partial, H5T_NATIVE_INT64, mspace, fspace, H5P_DEFAULT, v.data()), 0);
    h5_write_vector(f, "whole", std::vector<int64_t>(5000, 1), H5Layout{1024, 1, false});
  }
  H5Id f = h5_open_file(path);
  struct Case {
    const char* name;
    std::string says;
  };
  for (const Case& c : {Case{"huge", "declares shape [68719476736] in 65536 chunks, but the file stores only 0"},
                        Case{"contiguous", "declares shape [1000] (8000 bytes), but the file stores only 0 bytes"},
                        Case{"partial", "in 4 chunks, but the file stores only 3 of them"}}) {
    SCOPED_TRACE(c.name);
    try {
      h5_read_array<int64_t>(f, c.name);
      ADD_FAILURE() << "read";
    } catch (const DataError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(std::string("/") + c.name), std::string::npos) << w;
      EXPECT_NE(w.find(path), std::string::npos) << w;
      EXPECT_NE(w.find(c.says), std::string::npos) << w;
    }
  }
  // Written whole (its last chunk past the end, compressed): read as it is.
  EXPECT_EQ(h5_read_array<int64_t>(f, "whole"), std::vector<int64_t>(5000, 1));
}

}  // namespace
}  // namespace pf
