#include "launch/infer/sequence_split.h"

#include <limits>

#include "runtime/check.h"

namespace pf {

PositionBlock rank_block(int64_t n, int rank, int ranks) {
  PF_REQUIRE(ValueError, ranks >= 1 && rank >= 0 && rank < ranks && n >= 0,
             "rank " << rank << " of " << ranks << " for " << n << " positions");
  return PositionBlock{n * rank / ranks, n * (rank + 1) / ranks};
}

void sum_to_root(std::vector<double>& values, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  PF_REQUIRE(ValueError, values.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
             values.size() << " values exceed one MPI message");
  const int count = static_cast<int>(values.size());
  PF_MPI_CHECK(
      MPI_Reduce(rank == 0 ? MPI_IN_PLACE : values.data(), values.data(), count, MPI_DOUBLE, MPI_SUM, 0, comm));
}

}  // namespace pf
