// One sequence split over the ranks of a sequence group, as the trainer
// splits a sample: rank r of P holds the contiguous positions
// [r N / P, (r + 1) N / P) (balanced; a rank may hold none when N < P), and
// per-position results are summed into rank 0.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace pf {

struct PositionBlock {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool holds(int64_t i) const { return i >= begin && i < end; }
};

PositionBlock rank_block(int64_t n, int rank, int ranks);

// Element-wise sum of `values` over the ranks of `comm`, left in rank 0's
// `values` (the other ranks' are unchanged).
void sum_to_root(std::vector<double>& values, MPI_Comm comm);

}  // namespace pf
