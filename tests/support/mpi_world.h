// Size and rank of MPI_COMM_WORLD, for tests that run under mpiexec.
#pragma once

#include <mpi.h>

namespace pf::test {

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace pf::test
