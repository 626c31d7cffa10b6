// Host rounding of floats to the 16-bit storage types of the CUDA kernels, as
// raw words: IEEE binary16 through _Float16, bfloat16 by round-to-nearest-even
// on the top 16 bits. Used by the GPU tests to build inputs and references.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/dtype.h"

namespace pf::test {

inline uint16_t to_storage(float v, DType t) {
  if (t == DType::f16) {
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof(bits));
    return bits;
  }
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

inline float from_storage(uint16_t bits, DType t) {
  if (t == DType::f16) {
    _Float16 h;
    std::memcpy(&h, &bits, sizeof(h));
    return static_cast<float>(h);
  }
  const uint32_t b = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &b, sizeof(v));
  return v;
}

}  // namespace pf::test
