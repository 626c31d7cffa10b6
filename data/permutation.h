// A keyed pseudo-random permutation of [0, n) with O(1) memory and random
// access: a 4-round Feistel network over the smallest even-bit power of two
// >= n, keyed by mix64, with cycle walking back into [0, n) (fewer than four
// steps on average). Identical on every rank for the same (n, key), so each
// rank can compute any position of the epoch order without communication.
#pragma once

#include <cstdint>

#include "runtime/random.h"

namespace pf {

class KeyedPermutation {
 public:
  KeyedPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
    int bits = 2;
    while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
    half_ = (bits + 1) / 2;
    mask_ = (uint64_t{1} << half_) - 1;
  }
  uint64_t size() const { return n_; }
  // The element at position i of the permuted order, i in [0, n).
  uint64_t operator()(uint64_t i) const {
    if (n_ <= 1) return i;
    uint64_t x = i;
    do x = feistel(x);
    while (x >= n_);
    return x;
  }

 private:
  uint64_t feistel(uint64_t x) const {
    uint64_t left = x >> half_, right = x & mask_;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(key_ + round, right) & mask_;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }
  uint64_t n_, key_, mask_;
  int half_;
};

}  // namespace pf
