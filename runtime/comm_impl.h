// Argument checks shared by the communicator backends (comm_local.cc,
// comm_mpi.cc, comm_nccl.cu). Each throws CommError naming the call, the value
// and the communicator (rank, size, backend).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/comm.h"

namespace pf::detail {

void check_peer(const Communicator& comm, int peer, const char* call);
void check_count(const Communicator& comm, int64_t count, const char* call);
// Counts must fit the int of MPI's interfaces.
void check_int_count(const Communicator& comm, int64_t count, const char* call);
void check_not_in_group(const Communicator& comm, int group_depth, const char* call);
void check_group_open(const Communicator& comm, int group_depth);
// gatherv's arguments: a root in the group, a send count >= 0 and, on root,
// one count >= 0 per rank whose own entry is its send count. Returns the
// elements root receives (0 on the other ranks).
int64_t check_gatherv(const Communicator& comm, int64_t send_count, const std::vector<int64_t>& recv_counts, int root);
// Where rank r's block starts in root's recv: the counts of ranks 0..r-1.
int64_t gatherv_offset(const std::vector<int64_t>& recv_counts, int r);

}  // namespace pf::detail
