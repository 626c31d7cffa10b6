// The CUDA column sums (kernels/reduce/column_sums_cuda.cuh) and the CUDA
// embedding backward after its sort (kernels/embedding/embedding_backward_cuda.cuh)
// on the CPU under the block emulator: the kernel code and launch order the
// GPU runs, with scratch that starts as NaN. Include first (the emulator
// defines the CUDA keywords the kernels use), in one translation unit.
#pragma once

#include "tests/support/cuda_block_emulator.h"
// The emulator must come first.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/embedding/embedding_backward_cuda.cuh"
#include "kernels/reduce/column_sums_cuda.cuh"

namespace pf::test {

// The launch policy of the column sums on the emulator.
class EmulatedGridLaunch {
 public:
  float* buffer(int64_t floats) { return scratch_.buffer(floats); }
  template <typename... P, typename... A>
  void grid(void (*kernel)(P...), unsigned gx, unsigned gy, int threads, A... args) {
    if (gx == 0 || gy == 0) return;
    pf_emu::launch({gx, gy, 1}, {static_cast<unsigned>(threads), 1, 1}, 0, [&] { kernel(args...); });
  }

 private:
  pf_emu::Scratch scratch_;
};

// db[c] += sum_t dY[t, c], as linear_backward_cuda does for fp32.
inline void emulated_bias_grad(const float* dY, float* db, int64_t T, int64_t C) {
  EmulatedGridLaunch L;
  column_sums_cuda::add_column_sums<1>(L, column_sums_cuda::ValueRows<float, column_sums_cuda::Identity>{dY, C}, {{db}},
                                       T, C);
}

// The GPU's sort on the host: keys (out-of-range ids as V) and token indices,
// stable, so equal ids keep increasing t.
inline void sort_ids(const std::vector<int32_t>& ids, int64_t V, std::vector<int32_t>& keys,
                     std::vector<int32_t>& index) {
  const int64_t T = static_cast<int64_t>(ids.size());
  index.resize(T);
  std::iota(index.begin(), index.end(), 0);
  auto key = [&](int32_t t) { return ids[t] >= 0 && ids[t] < V ? ids[t] : static_cast<int32_t>(V); };
  std::stable_sort(index.begin(), index.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
  keys.resize(T);
  for (int64_t i = 0; i < T; ++i) keys[i] = key(index[i]);
}

// dTable += the scatter of dY by ids, as embedding_backward_cuda does.
inline void emulated_embedding_backward(const std::vector<int32_t>& ids, const float* dY, float* dTable, int64_t V,
                                        int64_t C) {
  std::vector<int32_t> keys, index;
  sort_ids(ids, V, keys, index);
  EmulatedGridLaunch L;
  embedding_cuda::add_sorted_rows(L, keys.data(), index.data(), dY, dTable, static_cast<int64_t>(ids.size()), V, C);
}

}  // namespace pf::test
