// Fletcher-32 and deflate of one chunk, as HDF5 stores it: see h5_filters.h.
#include "data/h5_filters.h"

#include <zlib.h>

#include <cstring>

#include "data/h5.h"
#include "runtime/errors.h"

namespace pf {

uint32_t h5_fletcher32(const uint8_t* data, size_t bytes) {
  uint32_t sum1 = 0, sum2 = 0;
  auto fold = [&] {
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  };
  size_t words = bytes / 2;
  while (words > 0) {
    const size_t block = words > 360 ? 360 : words;  // no 32-bit overflow before the fold
    words -= block;
    for (size_t i = 0; i < block; ++i, data += 2) {
      sum1 += (static_cast<uint32_t>(data[0]) << 8) | data[1];
      sum2 += sum1;
    }
    fold();
  }
  if (bytes % 2) {
    sum1 += static_cast<uint32_t>(data[0]) << 8;
    sum2 += sum1;
    fold();
  }
  fold();
  return (sum2 << 16) | sum1;
}

std::vector<uint8_t> h5_filter_chunk(const uint8_t* raw, size_t bytes, const H5Layout& layout) {
  std::vector<uint8_t> staged;
  const uint8_t* src = raw;
  size_t n = bytes;
  if (layout.checksum) {
    const uint32_t sum = h5_fletcher32(raw, bytes);
    staged.resize(bytes + 4);
    std::memcpy(staged.data(), raw, bytes);
    for (int b = 0; b < 4; ++b) staged[bytes + static_cast<size_t>(b)] = static_cast<uint8_t>(sum >> (8 * b));
    src = staged.data();
    n = staged.size();
  }
  if (layout.deflate <= 0) return staged.empty() ? std::vector<uint8_t>(raw, raw + bytes) : staged;
  uLongf out_bytes = compressBound(static_cast<uLong>(n));
  std::vector<uint8_t> out(out_bytes);
  const int status = compress2(out.data(), &out_bytes, src, static_cast<uLong>(n), layout.deflate);
  PF_REQUIRE(
      IoError, status == Z_OK,
      "zlib compress2 failed (status " << status << ") on a chunk of " << n << " bytes at level " << layout.deflate);
  out.resize(out_bytes);
  return out;
}

}  // namespace pf
