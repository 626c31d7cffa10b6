// A program in the frame of every MPI tool (run_mpi_program) whose ranks
// raise a ConfigError: "all" ranks at once, or only the "last" while the
// others wait in a barrier. mpi_program_test.sh runs it under mpiexec.
#include <mpi.h>

#include <cstring>

#include "launch/core/mpi_program.h"
#include "runtime/errors.h"

int main(int argc, char** argv) {
  const bool last_only = argc > 1 && std::strcmp(argv[1], "last") == 0;
  return pf::run_mpi_program(
      argc, argv, "config_error_ranks",
      [&](int size, int rank) {
        if (!last_only || rank == size - 1) throw pf::ConfigError("the value of key x is refused");
        MPI_Barrier(MPI_COMM_WORLD);  // never completes: the last rank is not coming
        return 0;
      },
      pf::MpiErrorReport::Ranked, /*agree_s=*/2.0);
}
