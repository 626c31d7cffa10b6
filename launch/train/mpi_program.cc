#include "launch/train/mpi_program.h"

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "runtime/errors.h"

namespace pf {

int run_mpi_program(int argc, char** argv, const char* name, const std::function<int(int, int)>& body,
                    MpiErrorReport report) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One failing rank ends the job: the others may be waiting for it in a collective.
  auto fail = [&](const std::exception& e) {
    if (report == MpiErrorReport::Ranked)
      std::fprintf(stderr, "%s: error on rank %d: %s\n", name, rank, e.what());
    else
      std::fprintf(stderr, "%s: %s\n", name, e.what());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  };
  int code = 0;
  try {
    code = body(size, rank);
  } catch (const ConfigError& e) {
    if (report == MpiErrorReport::Ranked) {
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", name, e.what());
      code = 2;
    } else {
      code = fail(e);
    }
  } catch (const std::exception& e) {
    code = fail(e);
  }
  if (!initialized) MPI_Finalize();
  return code;
}

}  // namespace pf
