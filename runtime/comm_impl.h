// Argument checks shared by the communicator backends (comm_local.cc,
// comm_mpi.cc, comm_nccl.cu). Each throws CommError naming the call, the value
// and the communicator (rank, size, backend).
#pragma once

#include <cstdint>

#include "runtime/comm.h"

namespace pf::detail {

void check_peer(const Communicator& comm, int peer, const char* call);
void check_count(const Communicator& comm, int64_t count, const char* call);
// Counts must fit the int of MPI's interfaces.
void check_int_count(const Communicator& comm, int64_t count, const char* call);
void check_not_in_group(const Communicator& comm, int group_depth, const char* call);
void check_group_open(const Communicator& comm, int group_depth);

}  // namespace pf::detail
