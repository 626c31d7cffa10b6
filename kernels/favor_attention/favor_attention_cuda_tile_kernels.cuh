// The tile kernels' entry points (__global__): the fused CUDA FAVOR+
// kernels that keep the carried state in shared or global memory, whose
// bodies are in favor_attention_cuda_fused.cuh (the prefix's or total's
// part of y among them), and the keys' part of a gradient state, which
// reads a state only. Apart from the resident kernels
// (favor_attention_cuda_resident.cuh), so that a file that compiles those
// does not compile these too. Included through
// favor_attention_cuda_launch.cuh.
#pragma once

#include "kernels/favor_attention/favor_attention_cuda_fused.cuh"

namespace pf {
namespace favor_cuda {
namespace {

// Every segment's own key state (key_segments_tiles).
__global__ void k_key_segments(const Args a) { key_segments_tiles(a); }

// Every segment's own query-gradient state, and with dq the bidirectional
// dq (query_segments_tiles).
__global__ void k_query_segments(const Args a) { query_segments_tiles(a); }

// The causal forward of each segment from its scanned state
// (causal_forward_tiles).
__global__ void k_causal_forward(const Args a) { causal_forward_tiles(a); }

// The causal backward of each segment (causal_backward_tiles).
__global__ void k_causal_backward(const Args a) { causal_backward_tiles(a); }

// The prefix's or total's part of y (add_prefix_tiles).
__global__ void k_add_prefix(const Args a) { add_prefix_tiles(a); }

// dk, dv (+)= the keys' part from a gradient state (sa, Sp) of later rows:
//   dPk = diag(exp(c_j + rho)) V' R^T,  dV = diag(exp(c_j + rho)) Pk R[:, :d],
// the rows fetched ahead where the resident kernels run
// (key_grads_from_state_staged).
__global__ void k_key_grad_from_state(const Args a) {
  const Dims& D = a.D;
  const Block b(a);
  const Tiles t = shared_tiles(D);
  const float rho = head_log_scale(a, b);
  // An empty suffix has nothing to read (uniform over the block).
  const float* R = is_empty_log_scale(rho) ? nullptr : carried_state(D, t, head_state(a, b));
  float* dW = zeroed_weight_grad(a, b);
#ifdef PF_FAVOR_MMA_TILES
  if (D.resident && R) return key_grads_from_state_staged(a, b, t, R, rho, dW);
#endif
  for_each_tile(D, b, false, [&](int t0, int rows, int64_t row) {
    if (is_empty_log_scale(rho)) {  // uniform over the block
      if (!a.accumulate) {
        float *dk = out_rows(a, b, a.dk, D.d, t0), *dv = out_rows(a, b, a.dv, D.d, t0);
        for (int e = threadIdx.x; e < rows * D.d; e += kThreads) {
          dk[e] = 0.f;
          dv[e] = 0.f;
        }
      }
      return;
    }
    load_keys(a, b, t, row, rows);
    for (int i = threadIdx.x; i < D.ct; i += kThreads) t.w[i] = log_scale_weight(t.c[i], -rho);
    __syncthreads();
    const int lm = tile_ld(D.mp), l1 = tile_ld(D.D1p);
    block_mm<false, true>(D, D.ct, D.mp, D.D1p, 1.f, t.VP, l1, R, D.D1p, 0.f, t.WK, lm, row_weights(t.w));
    block_mm<false, false>(D, D.ct, D.D1p, D.mp, 1.f, t.Pk, lm, R, D.D1p, 0.f, t.DX, l1, row_weights(t.w));
    store_key_grads(a, b, t, dW, t0, rows, a.accumulate);
  });
}

}  // namespace
}  // namespace favor_cuda
}  // namespace pf
