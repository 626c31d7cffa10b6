// Embedding lookup of token rows.
//   ids [T] int32 in [0, V), table [V, C], Y [T, C], dY [T, C], dTable [V, C]
//   forward:  Y[t, :] = table[ids[t], :]                   (Y overwritten)
//   backward: dTable[v, :] += sum over t with ids[t] == v of dY[t, :]
//             (accumulated; deterministic on both backends: the CPU sums each
//             row in increasing t, CUDA in fixed pieces of the id-sorted
//             tokens, so the two agree to rounding, each run to the bit)
// Positions for a learned positional table are ids too: the caller passes the
// global positions (rank offset + local index).
// The CPU path checks every id (ValueError naming the token and id); the CUDA
// path cannot read ids on the host, so out-of-range ids give zero rows in the
// forward and are ignored in the backward.
#pragma once

#include <cstdint>

#include "runtime/exec.h"

namespace pf {

void embedding_forward(const ExecContext& ctx, const int32_t* ids, const float* table, float* Y, int64_t T, int64_t V,
                       int64_t C);
void embedding_backward(const ExecContext& ctx, const int32_t* ids, const float* dY, float* dTable, int64_t T,
                        int64_t V, int64_t C);

void embedding_forward_cpu(const ExecContext& ctx, const int32_t* ids, const float* table, float* Y, int64_t T,
                           int64_t V, int64_t C);
void embedding_backward_cpu(const ExecContext& ctx, const int32_t* ids, const float* dY, float* dTable, int64_t T,
                            int64_t V, int64_t C);
// The CUDA backward sorts the ids (stable radix sort) in temporary device
// memory recorded in ctx.tracker (required): about 16 T bytes plus sort
// scratch, then 2 x column_sums_scratch_bytes(T, C, 1) for the pieces.
void embedding_forward_cuda(const ExecContext& ctx, const int32_t* ids, const float* table, float* Y, int64_t T,
                            int64_t V, int64_t C);
void embedding_backward_cuda(const ExecContext& ctx, const int32_t* ids, const float* dY, float* dTable, int64_t T,
                             int64_t V, int64_t C);

void embedding_forward_ref(const int32_t* ids, const double* table, double* Y, int64_t T, int64_t V, int64_t C);
void embedding_backward_ref(const int32_t* ids, const double* dY, double* dTable, int64_t T, int64_t V, int64_t C);

}  // namespace pf
