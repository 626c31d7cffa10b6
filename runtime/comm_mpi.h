// The communicators built over MPI: the only part of the communicator
// interface that needs <mpi.h>.
#pragma once

#include <mpi.h>

#include <memory>

#include "runtime/comm.h"

namespace pf {

// Host buffers over a duplicate of `comm` (errors are returned, then thrown as
// MpiError/CommError). MPI must be initialised; the result must be destroyed
// before MPI_Finalize. Its operations run on a CPU stream made as `streams`
// says (asynchronous streams need MPI_THREAD_MULTIPLE; CommError otherwise).
std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm, const HostStreamConfig& streams = host_streams_from_env());
// CUDA buffers, one GPU per rank (the node-local rank picks it). Throws
// CommError when the build has no CUDA backend or the node has fewer GPUs than
// ranks.
std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm comm);
// Buffers on `device` (a GPU or the CPU), staged through host memory and moved
// by an MPI communicator over a duplicate of `comm` (runtime/comm_staged.cc):
// stream-ordered like NCCL, for several ranks on one GPU. `streams` is the
// inner MPI communicator's (and a CPU device's) stream mode.
std::unique_ptr<Communicator> make_staged_comm(MPI_Comm comm, Device device, const HostStreamConfig& streams);

}  // namespace pf
