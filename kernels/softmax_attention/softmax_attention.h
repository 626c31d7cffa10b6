// Exact softmax attention (causal or bidirectional), forward and backward, per
// head: O = softmax(scale * Q K^T [+ causal and window mask]) V with Q, K, V, O [n, d]
// row-major fp32, batched over `heads` = B*H heads stored [B, H, n, d]
// contiguous. The forward also returns lse [heads, n], the natural-log
// log-sum-exp of each row of scaled (masked) scores: lse_i = m_i + log(l_i)
// with m_i the row max and l_i the sum of exp(s_ij - m_i); the backward
// rebuilds P_ij = exp(s_ij - lse_i) tile by tile from it.
//
// Every backend is tiled (online softmax over key tiles): no n x n matrix is
// ever stored, so memory is O(n d) per head for the tensors plus O(n) row
// statistics plus O(tile^2) scratch per thread (CPU) or per block (CUDA).
// The float64 reference (plain loops, O(n^2 d) time) is for tests only.
// Single sequence-group rank: the whole sequence of each head is local.
//
// Storage types: the overloads taking `DType storage` hold Q, K, V, O, dO, dQ,
// dK, dV as f32, f16 or bf16 (lse stays f32). On CUDA the kernels widen every
// tile to fp32 on load; scores, exponentials, row statistics and all sums run
// in fp32 and results are rounded once on store. The CPU backend stores f32
// only: f16/bf16 there throw ValueError naming the dtype.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/exec.h"
#include "runtime/row_spans.h"
#include "runtime/tile_math.h"

namespace pf {

struct SoftmaxAttentionParams {
  int64_t heads = 1;     // B*H
  int64_t n = 0;         // sequence length
  int64_t d = 0;         // head dimension
  bool causal = false;   // key j attends to query i only when j <= i
  int64_t window = 0;    // > 0: and only when |i - j| < window (causal: the window keys i - window + 1 .. i)
  float scale = 0.f;     // scores are scale * q.k; 0 selects 1/sqrt(d)
  int64_t q_tile = 64;   // CPU query-tile rows (the CUDA kernels use fixed tiles)
  int64_t k_tile = 128;  // CPU key-tile rows
  // CUDA only: the products on tensor cores with TF32 or bf16 operands (sm_80
  // and newer, when the tiles fit the device's shared memory;
  // softmax_attention_cuda_mma.cuh), or fp32 (the SIMT kernels). The CPU
  // computes in fp32 whatever is asked.
  TileMath tile_math = TileMath::Fp32;
  // Not null: the call runs over pieces of rows (runtime/row_spans.h; the
  // spans' heads are not read): call head i is rows [row0, row0 + len) of
  // Q, K, V, O, dO, dQ, dK, dV [rows, d] and lse [rows], its queries seeing
  // its own keys only (causal and window within the piece). heads must be
  // pieces->count() and n pieces->longest() (softmax_pieces_params). CUDA:
  // one launch per kernel over all pieces; CPU: the pieces' tiles over the
  // threads. Each piece's results are those of a call on its rows alone.
  const RowSpans* pieces = nullptr;
};

// The common cases: `heads` heads of n rows of d, causal or not, seeing only
// the keys less than `window` rows away (0: all), at the default scale
// 1/sqrt(d) with the default CPU tiles.
SoftmaxAttentionParams softmax_attention_params(int64_t heads, int64_t n, int64_t d, bool causal, int64_t window = 0);
// The same without a window, with the CPU tile rows given (benchmarks, tile tests).
SoftmaxAttentionParams softmax_attention_tiled_params(int64_t heads, int64_t n, int64_t d, bool causal, int64_t q_tile,
                                                      int64_t k_tile);
// One query per head against n keys of d (softmax_attention_decode, which
// reads neither the mask nor the tiles).
SoftmaxAttentionParams softmax_attention_decode_params(int64_t heads, int64_t n, int64_t d);

// 1/sqrt(d) when p.scale == 0, else p.scale. Throws ValueError on bad shapes.
float softmax_attention_scale(const SoftmaxAttentionParams& p);
// p over the pieces: heads and n from them.
SoftmaxAttentionParams softmax_pieces_params(SoftmaxAttentionParams p, const RowSpans& pieces);

// Validates sizes (n >= 0, d >= 1, heads >= 0, tiles >= 1, window >= 0, finite
// scale; with pieces, heads and n from them).
void softmax_attention_check(const SoftmaxAttentionParams& p);

// Dispatching forward: Q, K, V, O [heads, n, d]; lse [heads, n]. Pointers live on
// ctx.device; CUDA work is queued on ctx.stream.
void softmax_attention_forward(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q, const float* K,
                               const float* V, float* O, float* lse);
// Dispatching backward: given the forward's O and lse and dO [heads, n, d],
// writes dQ, dK, dV [heads, n, d] (overwritten, not accumulated).
void softmax_attention_backward(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q, const float* K,
                                const float* V, const float* O, const float* lse, const float* dO, float* dQ, float* dK,
                                float* dV);

// The same with `storage` (f32 on every backend; f16, bf16 on CUDA only) for
// Q, K, V, O, dO, dQ, dK, dV; lse is f32.
void softmax_attention_forward(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage, const void* Q,
                               const void* K, const void* V, void* O, float* lse);
void softmax_attention_backward(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage, const void* Q,
                                const void* K, const void* V, const void* O, const float* lse, const void* dO, void* dQ,
                                void* dK, void* dV);

// CPU (OpenMP over heads and query tiles, GEMM tiles through gemm_f32_host),
// on ctx.stream. Scratch is recorded in ctx.tracker under "softmax_attention"
// when it is non-null.
void softmax_attention_forward_cpu(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                   const float* K, const float* V, float* O, float* lse);
void softmax_attention_backward_cpu(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                    const float* K, const float* V, const float* O, const float* lse, const float* dO,
                                    float* dQ, float* dK, float* dV);
// Scratch bytes one call allocates through ctx.tracker on `device`, never
// O(n^2). CPU, with `threads` OpenMP threads: tile buffers per thread
// (independent of n) plus, in the backward, one O(n) row statistic per
// thread. CUDA (`threads` unused): none in the forward; the backward's D, one
// float per row the call reaches (softmax_attention_rows).
int64_t softmax_attention_forward_workspace_bytes(const SoftmaxAttentionParams& p, Device device, int threads);
int64_t softmax_attention_backward_workspace_bytes(const SoftmaxAttentionParams& p, Device device, int threads);
int64_t softmax_attention_cpu_forward_workspace_bytes(const SoftmaxAttentionParams& p, int threads);
int64_t softmax_attention_cpu_backward_workspace_bytes(const SoftmaxAttentionParams& p, int threads);
// Rows of the [rows, d] buffers a call reaches: heads * n, or the end of the
// pieces' rows.
int64_t softmax_attention_rows(const SoftmaxAttentionParams& p);

// CUDA (fp32 math, one block per (head, query tile) forward and per (head, key
// tile) backward; d <= 128). The backward allocates D (one float per row)
// through ctx.tracker (required) and synchronises ctx.stream before freeing
// it. Throws CudaError in a build without CUDA.
void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                    const float* K, const float* V, float* O, float* lse);
void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, const float* Q,
                                     const float* K, const float* V, const float* O, const float* lse, const float* dO,
                                     float* dQ, float* dK, float* dV);
void softmax_attention_forward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage,
                                    const void* Q, const void* K, const void* V, void* O, float* lse);
void softmax_attention_backward_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, DType storage,
                                     const void* Q, const void* K, const void* V, const void* O, const float* lse,
                                     const void* dO, void* dQ, void* dK, void* dV);

// One query per head against n keys: the last row of a causal block whose
// earlier rows are not wanted (the recurrent form of a local window), in
// O(heads n d) work instead of the block's O(heads n^2 d).
//   o_h = softmax(scale * K_h q_h) V_h
// q, o [heads, d]; head h's keys and values are the p.n rows of d floats
// at K + h * kv_stride and V + h * kv_stride (kv_stride >= n d floats).
// p.causal, p.window and the tiles are not used: the query sees all n keys
// (n >= 1). The same per-element math as the forward (softmax_exp, the
// online rescale). On ctx.device; CUDA: one block per head, d <= 128, no
// scratch.
void softmax_attention_decode(const ExecContext& ctx, const SoftmaxAttentionParams& p, int64_t kv_stride,
                              const float* q, const float* K, const float* V, float* o);
void softmax_attention_decode_cpu(const ExecContext& ctx, const SoftmaxAttentionParams& p, int64_t kv_stride,
                                  const float* q, const float* K, const float* V, float* o);
void softmax_attention_decode_cuda(const ExecContext& ctx, const SoftmaxAttentionParams& p, int64_t kv_stride,
                                   const float* q, const float* K, const float* V, float* o);
// Throws ValueError unless n >= 1 and kv_stride >= n d (and the shape checks hold).
void softmax_attention_decode_check(const SoftmaxAttentionParams& p, int64_t kv_stride);
void softmax_attention_decode_ref(const SoftmaxAttentionParams& p, int64_t kv_stride, const double* q, const double* K,
                                  const double* V, double* o);

// float64 reference: plain loops, one row of P at a time, O(n^2 d) time
// (tests; p without pieces).
// The backward recomputes everything from Q, K, V, dO (it takes no forward
// outputs, so it checks the CPU/CUDA use of O and lse independently).
void softmax_attention_forward_ref(const SoftmaxAttentionParams& p, const double* Q, const double* K, const double* V,
                                   double* O, double* lse);
void softmax_attention_backward_ref(const SoftmaxAttentionParams& p, const double* Q, const double* K, const double* V,
                                    const double* dO, double* dQ, double* dK, double* dV);

}  // namespace pf
