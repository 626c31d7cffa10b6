#include "launch/train/mpi_program.h"

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "runtime/errors.h"

namespace pf {

int run_mpi_program(const char* program, int argc, char** argv,
                    const std::function<int(int, int)>& body) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  try {
    code = body(size, rank);
  } catch (const ConfigError& e) {
    // Every rank reads the same configuration and fails the same way.
    if (rank == 0) std::fprintf(stderr, "%s: %s\n", program, e.what());
    code = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error on rank %d: %s\n", program, rank, e.what());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    code = 1;
  }
  MPI_Finalize();
  return code;
}

}  // namespace pf
