// Helpers for the communicator and scan tests, nccl-tests style: every input
// is a small integer keyed by (seed, rank, index), so each rank computes the
// exact expected result of any collective without a reference run, and sums
// of a few thousand such values are exact in f32 and f64.
//   keyed_int(seed, rank, index, lo, hi)   an integer in [lo, hi]
//   AffineCombine<T>    x -> a x + b maps, granule 2 ([a, b] pairs): not commutative
//   MatrixModCombine    2x2 integer matrices mod a prime, granule 4: not commutative
//   expected_scan(...)  the exact scan result, combined serially in scan order
//   segmented_fill(...) inputs of a segmented combine: flags by pattern, then values
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/random.h"
#include "runtime/scan.h"

namespace pf::test {

inline int64_t keyed_int(uint64_t seed, int rank, int64_t index, int64_t lo, int64_t hi) {
  const KeyedRandom rng(seed, static_cast<uint64_t>(rank), 0xc0c0);
  return lo + static_cast<int64_t>(rng.draw(static_cast<uint64_t>(index)).v[0] % static_cast<uint64_t>(hi - lo + 1));
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// Test combines run on the scan's stream, as a device kernel would.

// Composition of affine maps f(x) = a x + b stored as [a, b]; `earlier` is
// applied first: (earlier . later)(x) = later(earlier(x)).
template <typename T>
class AffineCombine final : public ScanCombine {
 public:
  DType dtype() const override { return dtype_of<T>::value; }
  Device device() const override { return Device::cpu(); }
  int64_t granule() const override { return 2; }
  const char* name() const override { return "affine"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    host_launch(stream, [=] {
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < count; i += 2) {
        o[i] = T(1);
        o[i + 1] = T(0);
      }
    });
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    host_launch(stream, [=] {
      const T* e = static_cast<const T*>(earlier);
      const T* l = static_cast<const T*>(later);
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < count; i += 2) {
        const T a = l[i] * e[i], b = l[i] * e[i + 1] + l[i + 1];
        o[i] = a;
        o[i + 1] = b;
      }
    });
  }
  // A keyed map with a in {-2, -1, 1, 2} (never 0, so no information is lost)
  // and b in [-3, 3]: P = 8 compositions stay below 2^24, exact in f32.
  static void fill_input(T* out, int64_t count, uint64_t seed, int rank) {
    for (int64_t i = 0; i < count; i += 2) {
      const int64_t a = keyed_int(seed, rank, i, 0, 3);
      out[i] = static_cast<T>(a < 2 ? a - 2 : a - 1);
      out[i + 1] = static_cast<T>(keyed_int(seed, rank, i + 1, -3, 3));
    }
  }
};

// 2x2 matrices [m00, m01, m10, m11] with entries mod kPrime; earlier . later =
// earlier x later (matrix product), identity I.
class MatrixModCombine final : public ScanCombine {
 public:
  static constexpr int64_t kPrime = 1000003;
  DType dtype() const override { return DType::i64; }
  Device device() const override { return Device::cpu(); }
  int64_t granule() const override { return 4; }
  const char* name() const override { return "matrix_mod_p"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    host_launch(stream, [=] {
      int64_t* o = static_cast<int64_t*>(out);
      for (int64_t i = 0; i < count; i += 4) {
        o[i] = 1;
        o[i + 1] = 0;
        o[i + 2] = 0;
        o[i + 3] = 1;
      }
    });
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    host_launch(stream, [=] {
      const int64_t* x = static_cast<const int64_t*>(earlier);
      const int64_t* y = static_cast<const int64_t*>(later);
      int64_t* o = static_cast<int64_t*>(out);
      for (int64_t i = 0; i < count; i += 4) {
        const int64_t m00 = (x[i] * y[i] + x[i + 1] * y[i + 2]) % kPrime;
        const int64_t m01 = (x[i] * y[i + 1] + x[i + 1] * y[i + 3]) % kPrime;
        const int64_t m10 = (x[i + 2] * y[i] + x[i + 3] * y[i + 2]) % kPrime;
        const int64_t m11 = (x[i + 2] * y[i + 1] + x[i + 3] * y[i + 3]) % kPrime;
        o[i] = m00;
        o[i + 1] = m01;
        o[i + 2] = m10;
        o[i + 3] = m11;
      }
    });
  }
  static void fill_input(int64_t* out, int64_t count, uint64_t seed, int rank) {
    for (int64_t i = 0; i < count; ++i) out[i] = keyed_int(seed, rank, i, 0, kPrime - 1);
  }
};

// Integer-valued sum inputs in [-1000, 1000].
template <typename T>
void fill_sum_input(T* out, int64_t count, uint64_t seed, int rank) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(keyed_int(seed, rank, i, -1000, 1000));
}

// The segmented form of a combine (make_segmented_combine): each granule gets
// a flag in front of it, set by one of these patterns per (rank, granule).
enum class Flags { None, All, FirstRank, LastRank, Random };
const Flags kFlagPatterns[] = {Flags::None, Flags::All, Flags::FirstRank, Flags::LastRank, Flags::Random};

bool flag_of(Flags flags, uint64_t seed, int rank, int ranks, int64_t granule) {
  switch (flags) {
    case Flags::None: return false;
    case Flags::All: return true;
    case Flags::FirstRank: return rank == 0;
    case Flags::LastRank: return rank == ranks - 1;
    default: return keyed_int(seed ^ 0x5e6, rank, granule, 0, 2) == 0;
  }
}

// A segmented input: granule j is its flag, then granule j of `fill`'s values.
template <typename T, typename Fill>
auto segmented_fill(Fill fill, int64_t g, Flags flags, int ranks) {
  return [=](T* out, int64_t count, uint64_t seed, int rank) {
    const int64_t granules = count / (g + 1);
    std::vector<T> inner(static_cast<size_t>(granules * g));
    fill(inner.data(), granules * g, seed, rank);
    for (int64_t j = 0; j < granules; ++j) {
      out[j * (g + 1)] = flag_of(flags, seed, rank, ranks, j) ? T(1) : T(0);
      for (int64_t e = 0; e < g; ++e) out[j * (g + 1) + 1 + e] = inner[j * g + e];
    }
  };
}

// The exact scan result on `rank` of `ranks`, combining the keyed inputs of
// the ranks before it in scan order. `fill(out, count, seed, rank)` makes rank's input.
template <typename T, typename Fill>
std::vector<T> expected_scan(const ScanCombine& combine, Fill fill, int64_t count, uint64_t seed, int rank, int ranks,
                             ScanDirection direction) {
  std::vector<T> acc(static_cast<size_t>(count)), block(static_cast<size_t>(count));
  const Stream host;
  combine.fill_identity(acc.data(), count, host);
  const int v = direction == ScanDirection::Forward ? rank : ranks - 1 - rank;
  for (int i = 0; i < v; ++i) {
    const int source = direction == ScanDirection::Forward ? i : ranks - 1 - i;
    fill(block.data(), count, seed, source);
    combine.combine(acc.data(), block.data(), acc.data(), count, host);
  }
  return acc;
}

}  // namespace pf::test
