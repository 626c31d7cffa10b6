// make_nccl_comm for builds without the CUDA backend: a clear CommError.
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"

namespace pf {

std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm, Watchdog*) {
  PF_REQUIRE(CommError, false,
             "an NCCL communicator was requested, but " << cuda_unavailable_reason()
                                                        << "; rebuild with CUDA and NCCL, or use the MPI backend");
  return nullptr;
}

int nccl_watch_device(const Communicator&) { return -1; }

}  // namespace pf
