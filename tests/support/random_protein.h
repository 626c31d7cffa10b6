// A protein of `length` random residues (token ids 4..23, the 20 standard
// amino acids), drawn from the counter-based generator keyed by (seed,
// stream, key): the same protein on every rank and every run.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/random.h"

namespace pf::test {

inline std::vector<uint8_t> random_protein(uint64_t seed, uint64_t stream, uint64_t key, int64_t length) {
  const KeyedRandom r(seed, stream, key);
  std::vector<uint8_t> p;
  for (int64_t i = 0; i < length; ++i) p.push_back(static_cast<uint8_t>(4 + r.draw(i).v[0] % 20));
  return p;
}

}  // namespace pf::test
