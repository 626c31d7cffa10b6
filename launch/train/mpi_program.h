// The frame of an MPI program: MPI_Init_thread (MULTIPLE: the
// attention scan and the gradient allreduce run on worker threads), the body, and
// error handling that ends the whole job with the message instead of leaving
// other ranks waiting in a collective: the failing rank prints
// "<program>: error on rank R: ..." and calls MPI_Abort when there are
// several ranks. Returns the exit code (0 ok, 1 error, 2 usage/config error).
#pragma once

#include <functional>

namespace pf {

int run_mpi_program(const char* program, int argc, char** argv,
                    const std::function<int(int world_size, int world_rank)>& body);

}  // namespace pf
