// Per-element kernels of the fused CUDA FAVOR+ algorithm
// (favor_attention_cuda_fused.cuh) over projections, states and the feature
// slices' parts rather than tiles of rows: the padded projections and the
// sum of the blocks' projection gradients, the packed states split into the
// slices' padded ones and merged back (one log-scale), the slices' parts of
// y, the row log-scales and the gradients combined into the call's outputs,
// and the exclusive scan of the segment states. Grid-stride loops, kThreads
// per block; no shared memory. Included by favor_attention_cuda_launch.cuh
// (not by the resident kernels' files, which launch none of these).
#pragma once

#include <cstdint>

#include "kernels/favor_attention/favor_attention_cuda_fused.cuh"
#include "kernels/linear_attention/linear_attention_math.h"

namespace pf {
namespace favor_cuda {
namespace {

// A grid-stride loop over [0, count).
#define PF_GRID_LOOP(e, count) \
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < (count); e += int64_t(gridDim.x) * blockDim.x)

// Wp [w_heads, slices, mp, dp] = W [w_heads, m_all, d], each slice's rows
// of it, with zero padding.
__global__ void k_pad_projection(Dims D, const float* W, float* Wp) {
  const int64_t PF = D.projection_floats();
  PF_GRID_LOOP(e, int64_t(D.w_heads) * D.slices * PF) {
    const int64_t w = e / PF / D.slices;
    const int z = static_cast<int>(e / PF % D.slices), l = static_cast<int>(e % PF / D.dp),
              j = static_cast<int>(e % D.dp);
    Wp[e] = l < D.slice_features(z) && j < D.d ? W[(w * D.m_all + z * D.ms + l) * D.d + j] : 0.f;
  }
}

// dW [slots, m_all, d] += the sum of the block slots of dWp of the heads of
// each dW slot (uniform: head h is slot h), heads and segments in order.
__global__ void k_sum_weight_grads(Dims D, int64_t heads, const int64_t* spans, int64_t slots, const float* dWp,
                                   float* dW) {
  const int64_t md = int64_t(D.m_all) * D.d, PF = D.projection_floats();
  PF_GRID_LOOP(e, slots * md) {
    const int64_t g = e / md;
    const int f = static_cast<int>(e % md / D.d), j = static_cast<int>(e % D.d);
    const int z = f / D.ms, l = f % D.ms;
    float sum = 0.f;
    for (int64_t h = spans ? 0 : g; h < (spans ? heads : g + 1); ++h) {
      if (spans && span_of(spans, h, 0).head != g) continue;
      for (int seg = 0; seg < D.segs; ++seg)
        sum += dWp[((h * D.segs + seg) * D.slices + z) * PF + int64_t(l) * D.dp + j];
    }
    dW[e] += sum;
  }
}

// Sp[h][z] = slice z of packed[h], padded (log-scales stay in the packed array).
__global__ void k_unpack_states(Dims D, int64_t heads, const float* packed, float* Sp) {
  const int64_t SF = D.state_floats();
  PF_GRID_LOOP(e, heads * D.slices * SF) {
    const int64_t h = e / SF / D.slices;
    const int z = static_cast<int>(e / SF % D.slices), f = static_cast<int>(e % SF / D.D1p),
              x = static_cast<int>(e % D.D1p);
    Sp[e] =
        f < D.slice_features(z) && x < D.D1 ? packed[h * D.packed_size() + 1 + int64_t(z * D.ms + f) * D.D1 + x] : 0.f;
  }
}

// packed[h] = the slices' states S [heads][slices][mp D1p] with log-scales a
// [heads][slices] as one state at the largest of them, each slice's rows
// weighted by exp(its log-scale - that).
__global__ void k_merge_states(Dims D, int64_t heads, const float* S, const float* a, float* packed) {
  const int64_t P = D.packed_size();
  PF_GRID_LOOP(e, heads * P) {
    const int64_t h = e / P, k = e % P;
    float top = kEmptyLogScale;
    for (int z = 0; z < D.slices; ++z) top = max_log_scale(top, a[h * D.slices + z]);
    if (k == 0) {
      packed[e] = top;
      continue;
    }
    const int f = static_cast<int>((k - 1) / D.D1), x = static_cast<int>((k - 1) % D.D1), z = f / D.ms;
    packed[e] = log_scale_weight(a[h * D.slices + z], top) *
                S[(h * D.slices + z) * D.state_floats() + int64_t(f % D.ms) * D.D1p + x];
  }
}

// The rows of call head blockIdx.x, one warp per row: f(row in the
// buffers). Grid: (heads, up to 65535 row groups of kWarps rows, looping
// over the rest).
template <class F>
__device__ inline void for_each_row(const Dims& D, const int64_t* spans, F&& f) {
  const HeadRows x = head_rows(D, spans, blockIdx.x);
  for (int64_t i = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32; i < x.len; i += int64_t(gridDim.y) * kWarps)
    f(x.row0 + i);
}

// y, L (width D1 and 1) from the slices' parts [slices][extent] of the
// same rows at their row log-scales: L_i = the largest of them (and of L_i
// when accumulating), y_i = the sum of the parts and (accumulating) of y_i,
// each weighted by exp(its log-scale - L_i).
__global__ void k_combine_rows(Dims D, int64_t extent, const int64_t* spans, const float* part_y, const float* part_L,
                               float* y, float* L, bool accumulate) {
  const int lane = threadIdx.x % 32;
  for_each_row(D, spans, [&](int64_t row) {
    const float old = accumulate ? L[row] : kEmptyLogScale;
    float top = old;
    for (int z = 0; z < D.slices; ++z) top = max_log_scale(top, part_L[z * extent + row]);
    for (int x = lane; x < D.D1; x += 32) {
      float sum = accumulate ? log_scale_weight(old, top) * y[row * D.D1 + x] : 0.f;
      for (int z = 0; z < D.slices; ++z)
        sum += log_scale_weight(part_L[z * extent + row], top) * part_y[(z * extent + row) * D.D1 + x];
      y[row * D.D1 + x] = sum;
    }
    __syncwarp();  // every lane has read L[row] before it is written
    if (lane == 0) L[row] = top;
  });
}

// out [rows, width] (+)= the sum of the slices' parts [slices][extent][width]
// of the same rows, in slice order.
__global__ void k_sum_parts(Dims D, int64_t extent, const int64_t* spans, const float* parts, int width, float* out,
                            bool accumulate) {
  const int lane = threadIdx.x % 32;
  for_each_row(D, spans, [&](int64_t row) {
    for (int x = lane; x < width; x += 32) {
      float sum = accumulate ? out[row * width + x] : 0.f;
      for (int z = 0; z < D.slices; ++z) sum += parts[(z * extent + row) * width + x];
      out[row * width + x] = sum;
    }
  });
}

// Exclusive scan of each head's segment states of each slice, in order (or
// from the last when reverse), starting from `init` (packed, or null for the
// empty state): S[h][seg][z] becomes init (+) the states before it,
// a_out[h][seg][z] its log-scale; total_S [heads][slices][mp D1p] and total_a
// [heads][slices] (or null) receive init (+) all of them (k_merge_states
// packs them). Grid: (heads * slices, entries / kThreads); a_in is only read.
__global__ void k_scan_segments(Dims D, float* S, const float* a_in, float* a_out, const float* init, float* total_S,
                                float* total_a, bool reverse) {
  const int64_t SF = D.state_floats(), e = blockIdx.y * int64_t(kThreads) + threadIdx.x;
  const int h = blockIdx.x / D.slices, z = blockIdx.x % D.slices;
  const int f = static_cast<int>(e / D.D1p), x = static_cast<int>(e % D.D1p);
  const bool inside = e < SF, valid = inside && f < D.slice_features(z) && x < D.D1;
  const int64_t packed = int64_t(h) * D.packed_size() + 1 + int64_t(z * D.ms + f) * D.D1 + x;
  float run_a = init ? init[int64_t(h) * D.packed_size()] : kEmptyLogScale;
  float run = init && valid ? init[packed] : 0.f;
  for (int step = 0; step < D.segs; ++step) {
    const int seg = reverse ? D.segs - 1 - step : step;
    const int64_t slot = (int64_t(h) * D.segs + seg) * D.slices + z;
    const float la = a_in[slot];
    float local = 0.f;
    if (inside) {
      local = S[slot * SF + e];
      S[slot * SF + e] = run;
    }
    if (blockIdx.y == 0 && threadIdx.x == 0) a_out[slot] = run_a;
    const float top = max_log_scale(run_a, la);
    run = log_scale_weight(run_a, top) * run + log_scale_weight(la, top) * local;
    run_a = top;
  }
  if (total_S) {
    if (inside) total_S[int64_t(blockIdx.x) * SF + e] = run;
    if (blockIdx.y == 0 && threadIdx.x == 0) total_a[blockIdx.x] = run_a;
  }
}

}  // namespace
}  // namespace favor_cuda
}  // namespace pf
