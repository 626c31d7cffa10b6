// Counter-based random numbers, identical on every rank, backend and platform.
// Everything random in the trainer is keyed by global coordinates
// (seed, step, layer, sample, global position), never by rank or by draw
// order, so a run on sp = 1 and sp = 4 computes the same function.
//   philox4x32(counter, key)   Philox4x32-10 (Salmon et al., SC'11): 4 x u32 per call
//   mix64(a, b)                SplitMix64-style hash of two words
//   Normal draws use Box-Muller on two uniforms from one Philox call; the
//   sampler is ours (not <random>) so results do not depend on the library.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/hd.h"

namespace pf {

struct Philox4 {
  uint32_t v[4];
};

PF_HD Philox4 philox4x32(Philox4 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

PF_HD uint64_t mix64(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1], from 32 bits (never 0, so log() is safe).
PF_HD double uniform_open0(uint32_t bits) { return (static_cast<double>(bits) + 1.0) * (1.0 / 4294967296.0); }

// A stream of draws keyed by (seed, a, b): e.g. (seed, layer, redraw index).
// draw(i) gives the i-th block of four u32; independent of how many draws
// were taken before.
struct KeyedRandom {
  uint64_t key;
  PF_HD KeyedRandom(uint64_t seed, uint64_t a, uint64_t b) : key(mix64(mix64(seed, a), b)) {}
  PF_HD Philox4 draw(uint64_t i) const {
    Philox4 ctr{{static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), 0u, 0u}};
    return philox4x32(ctr, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  }
  // Uniform in [0, 1) from the first word of draw i.
  PF_HD double uniform(uint64_t i) const { return draw(i).v[0] * (1.0 / 4294967296.0); }
  // Two independent standard normals from draw i (Box-Muller).
  void normal2(uint64_t i, double* z0, double* z1) const {
    const Philox4 r = draw(i);
    // 53-bit uniforms from two words each for the radius and the angle.
    const double a = (static_cast<double>(r.v[0] >> 5) * 67108864.0 + static_cast<double>(r.v[1] >> 6) + 1.0) *
                     (1.0 / 9007199254740993.0);  // (0, 1]
    const double b = (static_cast<double>(r.v[2] >> 5) * 67108864.0 + static_cast<double>(r.v[3] >> 6)) *
                     (1.0 / 9007199254740992.0);  // [0, 1)
    const double radius = std::sqrt(-2.0 * std::log(a));
    const double angle = 6.283185307179586476925286766559 * b;
    *z0 = radius * std::cos(angle);
    *z1 = radius * std::sin(angle);
  }
};

// `n` standard normals times `scale`, draw i/2 of `rng` giving values i and i+1.
template <typename T>
void fill_normal(T* out, int64_t n, const KeyedRandom& rng, double scale = 1.0) {
  for (int64_t i = 0; i < n; i += 2) {
    double z0, z1;
    rng.normal2(static_cast<uint64_t>(i / 2), &z0, &z1);
    out[i] = static_cast<T>(scale * z0);
    if (i + 1 < n) out[i + 1] = static_cast<T>(scale * z1);
  }
}

template <typename T>
std::vector<T> keyed_normals(int64_t n, uint64_t seed, uint64_t a, uint64_t b, double scale = 1.0) {
  std::vector<T> out(static_cast<size_t>(n));
  fill_normal(out.data(), n, KeyedRandom(seed, a, b), scale);
  return out;
}

}  // namespace pf
