// The filter pipeline that H5Layout{chunk, deflate, checksum} gives a dataset
// (data/h5.h: Fletcher-32 first, then deflate), applied to one chunk outside
// HDF5, so that chunks can be filtered on worker threads and stored with
// H5Dwrite_chunk (data/h5_direct_appender.h) while every HDF5 call stays on
// one thread. The bytes equal what HDF5's own filters store for the same
// chunk with the same zlib (tests/data/test_h5_direct_appender.cc reads them
// back raw with H5Dread_chunk and compares).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pf {

struct H5Layout;

// HDF5's Fletcher-32: big-endian 16-bit words (an odd last byte is the high
// byte of a zero-padded word), sums folded to 16 bits every 360 words and at
// the end; (sum2 << 16) | sum1.
uint32_t h5_fletcher32(const uint8_t* data, size_t bytes);

// One chunk of `bytes` raw bytes through the layout's filters: with
// layout.checksum the Fletcher-32 is appended little-endian; with
// layout.deflate > 0 the result is compressed with zlib's compress2 at that
// level (into compressBound bytes, as HDF5's deflate filter does). IoError
// when zlib fails.
std::vector<uint8_t> h5_filter_chunk(const uint8_t* raw, size_t bytes, const H5Layout& layout);

}  // namespace pf
