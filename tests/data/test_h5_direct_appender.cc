// Chunks filtered on worker threads and stored with H5Dwrite_chunk
// (data/h5_direct_appender.h): the same dataset, and the same stored bytes
// in every chunk, as HDF5's own filter pipeline writes through H5Appender.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "data/h5.h"
#include "data/h5_direct_appender.h"
#include "data/h5_filters.h"
#include "runtime/random.h"
#include "tests/data/data_test_util.h"

namespace pf {
namespace {

// The raw stored bytes and filter mask of every chunk of a 1-D dataset.
struct StoredChunk {
  uint32_t mask = 0;
  std::vector<uint8_t> bytes;
};
std::vector<StoredChunk> stored_chunks(hid_t dset, int64_t chunk) {
  std::vector<StoredChunk> out;
  const int64_t n = h5_dataset_length(dset);
  for (int64_t first = 0; first < n; first += chunk) {
    const hsize_t offset = static_cast<hsize_t>(first);
    hsize_t size = 0;
    EXPECT_GE(H5Dget_chunk_storage_size(dset, &offset, &size), 0);
    StoredChunk c;
    c.bytes.resize(size);
    EXPECT_GE(H5Dread_chunk(dset, H5P_DEFAULT, &offset, &c.mask, c.bytes.data()), 0);
    out.push_back(std::move(c));
  }
  return out;
}

template <typename T>
std::vector<T> random_values(size_t n, uint64_t seed, uint64_t range) {
  const KeyedRandom rng(seed, 0, 0);
  std::vector<T> v(n);
  // A narrow range, like residues, so deflate has something to find.
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(rng.draw(i).v[0] % range);
  return v;
}

// Appends `values` in pieces of random sizes through both appenders and
// compares the datasets and their stored chunks.
template <typename T>
void expect_same_as_hdf5(const std::vector<T>& values, const H5Layout& layout, int workers, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << values.size() << " values, chunk " << layout.chunk << ", deflate "
                                  << layout.deflate << ", checksum " << layout.checksum << ", " << workers
                                  << " workers");
  test::TempDir dir;
  const std::string path = dir.file("a.h5");
  const KeyedRandom pieces(seed, 1, 0);
  {
    H5Id f = h5_create_file(path);
    TaskPool pool(workers);
    H5Appender reference(f, "reference", h5_native_type<T>(), layout);
    H5DirectAppender direct(f, "direct", h5_native_type<T>(), layout, &pool);
    size_t at = 0;
    for (uint64_t k = 0; at < values.size(); ++k) {
      const size_t n = std::min<size_t>(values.size() - at, pieces.draw(k).v[0] % (3 * layout.chunk) + 1);
      reference.append_raw(values.data() + at, static_cast<int64_t>(n));
      direct.append(values.data() + at, static_cast<int64_t>(n));
      at += n;
    }
    direct.finish();
    EXPECT_EQ(direct.size(), static_cast<int64_t>(values.size()));
  }
  H5Id f = h5_open_file(path);
  EXPECT_EQ(h5_read_array<T>(f, "direct"), values);  // H5Dread verifies the checksums
  H5Id ref = h5_open_dataset(f, "reference"), dir_set = h5_open_dataset(f, "direct");
  const std::vector<StoredChunk> a = stored_chunks(ref, layout.chunk), b = stored_chunks(dir_set, layout.chunk);
  ASSERT_EQ(a.size(), b.size());
  for (size_t c = 0; c < a.size(); ++c) {
    EXPECT_EQ(a[c].mask, 0u) << "chunk " << c;
    EXPECT_EQ(b[c].mask, 0u) << "chunk " << c;
    EXPECT_TRUE(a[c].bytes == b[c].bytes) << "chunk " << c << ": " << a[c].bytes.size() << " stored bytes by HDF5, "
                                          << b[c].bytes.size() << " by the direct path";
  }
}

TEST(H5DirectAppender, SameDatasetAndStoredChunksAsHdf5sFilters) {
  const H5Layout layouts[] = {{4096, 4, true}, {4096, 0, true}, {4096, 6, false}, {1001, 4, true}};
  uint64_t seed = 1;
  for (const H5Layout& layout : layouts) {
    for (size_t n : {size_t{0}, size_t{1}, size_t(layout.chunk - 1), size_t(layout.chunk), size_t(layout.chunk + 1),
                     size_t(37 * layout.chunk + 555)}) {
      for (int workers : {0, 1, 3}) {
        expect_same_as_hdf5(random_values<uint8_t>(n, seed, 25), layout, workers, seed);
        ++seed;
      }
    }
    expect_same_as_hdf5(random_values<int64_t>(size_t(5 * layout.chunk + 3), seed, 1u << 20), layout, 1, seed);
    ++seed;
  }
}

TEST(H5DirectAppender, ChecksumOfOddAndLongInputsMatchesWhatHdf5Stores) {
  // An odd byte count and more than 360 words exercise both folds of the sum.
  for (int64_t chunk : {1, 3, 721, 65537}) {
    const std::vector<uint8_t> v = random_values<uint8_t>(static_cast<size_t>(chunk), 99 + chunk, 256);
    test::TempDir dir;
    const std::string path = dir.file("c.h5");
    {
      H5Id f = h5_create_file(path);
      H5Appender app(f, "x", H5T_NATIVE_UINT8, H5Layout{chunk, 0, true});
      app.append_raw(v.data(), chunk);
    }
    H5Id f = h5_open_file(path);
    H5Id d = h5_open_dataset(f, "x");
    const std::vector<StoredChunk> s = stored_chunks(d, chunk);
    ASSERT_EQ(s.size(), 1u);
    ASSERT_EQ(s[0].bytes.size(), v.size() + 4);
    uint32_t stored = 0;
    for (int b = 0; b < 4; ++b)
      stored |= static_cast<uint32_t>(s[0].bytes[v.size() + static_cast<size_t>(b)]) << (8 * b);
    EXPECT_EQ(h5_fletcher32(v.data(), v.size()), stored) << "chunk of " << chunk << " bytes";
    EXPECT_EQ(h5_filter_chunk(v.data(), v.size(), H5Layout{chunk, 0, true}), s[0].bytes);
  }
}

TEST(H5DirectAppender, RefusesVariableLengthTypesAndAppendAfterFinish) {
  test::TempDir dir;
  H5Id f = h5_create_file(dir.file("r.h5"));
  TaskPool pool(0);
  H5Id str(H5Tcopy(H5T_C_S1));
  ASSERT_GE(H5Tset_size(str, H5T_VARIABLE), 0);
  EXPECT_THROW(H5DirectAppender(f, "s", str, H5Layout{16, 4, true}, &pool), ValueError);
  EXPECT_THROW(H5DirectAppender(f, "z", H5T_NATIVE_UINT8, H5Layout{0, 4, true}, &pool), ValueError);
  H5DirectAppender app(f, "u", H5T_NATIVE_UINT8, H5Layout{16, 4, true}, &pool);
  const uint8_t x = 7;
  app.append(&x, 1);
  app.finish();
  try {
    app.append(&x, 1);
    FAIL() << "append after finish was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'u'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pf
