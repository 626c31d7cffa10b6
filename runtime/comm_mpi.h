// The communicators built over MPI: the only part of the communicator
// interface that needs <mpi.h>.
#pragma once

#include <mpi.h>

#include <memory>

#include "runtime/comm.h"

namespace pf {

class Watchdog;

// Host buffers over a duplicate of `comm` (errors are returned, then thrown as
// MpiError/CommError). MPI must be initialised; the result must be destroyed
// before MPI_Finalize. Its operations run on a CPU stream made as `streams`
// says (asynchronous streams need MPI_THREAD_MULTIPLE; CommError otherwise).
// Every wait is an operation of `watchdog` when one is given (it must outlive
// the communicator and those split from it).
std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm, const HostStreamConfig& streams = host_streams_from_env(),
                                            Watchdog* watchdog = nullptr);
// CUDA buffers, one GPU per rank (the node-local rank picks it). Throws
// CommError when the build has no CUDA backend or the node has fewer GPUs than
// ranks.
// With a watchdog, each operation is watched until its work on the stream is
// done, and the watchdog aborts the NCCL communicator (ncclCommAbort) when it
// fires.
std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm comm, Watchdog* watchdog = nullptr);
// The device the watchdog's thread had bound when it last polled an event of
// this NCCL communicator (its own device; -1 before any poll, or for another
// backend): the test that the watchdog never polls on another GPU.
int nccl_watch_device(const Communicator& comm);
// Buffers on `device` (a GPU or the CPU), staged through host memory and moved
// by an MPI communicator over a duplicate of `comm` (runtime/comm_staged.cc):
// stream-ordered like NCCL, for several ranks on one GPU. `streams` is the
// inner MPI communicator's (and a CPU device's) stream mode.
std::unique_ptr<Communicator> make_staged_comm(MPI_Comm comm, Device device, const HostStreamConfig& streams,
                                               Watchdog* watchdog = nullptr);

}  // namespace pf
