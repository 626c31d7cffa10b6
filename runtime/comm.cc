// Backend-independent parts of the communicator layer: names, argument checks,
// and the grouped send/receive exchange step.
#include "runtime/comm.h"

#include <climits>
#include <sstream>

#include "runtime/check.h"
#include "runtime/comm_impl.h"

namespace pf {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

std::string comm_description(const Communicator& comm) {
  std::ostringstream os;
  os << "rank " << comm.rank() << " of " << comm.size() << " (" << comm.backend_name() << " on " << comm.device().str()
     << ")";
  return os.str();
}

void send_recv(Communicator& comm, const void* send_buf, int send_peer, void* recv_buf, int recv_peer, int64_t count,
               DType dtype) {
  comm.group_begin();
  if (send_peer >= 0) comm.send(send_buf, count, dtype, send_peer);
  if (recv_peer >= 0) comm.recv(recv_buf, count, dtype, recv_peer);
  comm.group_end();
}

namespace detail {

void check_peer(const Communicator& comm, int peer, const char* call) {
  PF_REQUIRE(CommError, peer >= 0 && peer < comm.size(),
             call << ": peer " << peer << " is outside the group on " << comm_description(comm));
}

void check_count(const Communicator& comm, int64_t count, const char* call) {
  PF_REQUIRE(CommError, count >= 0, call << ": negative element count " << count << " on " << comm_description(comm));
}

void check_int_count(const Communicator& comm, int64_t count, const char* call) {
  check_count(comm, count, call);
  PF_REQUIRE(CommError, count <= INT_MAX,
             call << ": " << count << " elements exceed the " << INT_MAX << " that one MPI call can move on "
                  << comm_description(comm));
}

void check_not_in_group(const Communicator& comm, int group_depth, const char* call) {
  PF_REQUIRE(CommError, group_depth == 0,
             call << " is not allowed inside group_begin/group_end on " << comm_description(comm));
}

void check_group_open(const Communicator& comm, int group_depth) {
  PF_REQUIRE(CommError, group_depth > 0, "group_end without group_begin on " << comm_description(comm));
}

}  // namespace detail
void allreduce_host_values(Communicator& comm, void* values, int64_t count, DType dtype, ReduceOp op,
                           MemoryTracker& tracker) {
  if (comm.device().is_cpu()) {
    comm.allreduce(values, values, count, dtype, op);
    synchronize(comm.stream());
    return;
  }
  const int64_t bytes = count * dtype_size(dtype);
  const Stream s = comm.stream();
  void* staged = device_allocate(tracker, bytes, "comm.host_values");
  stream_wait_stream(s, tracker.stream());  // the allocation is ordered on the tracker's stream
  try {
    copy_bytes(s, staged, comm.device(), values, Device::cpu(), bytes);
    comm.allreduce(staged, staged, count, dtype, op);
    copy_bytes(s, values, Device::cpu(), staged, comm.device(), bytes);
    synchronize(s);
  } catch (...) {
    device_free(tracker, staged, bytes, "comm.host_values", &s);
    throw;
  }
  device_free(tracker, staged, bytes, "comm.host_values", &s);
}

}  // namespace pf
