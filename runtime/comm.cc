// Backend-independent parts of the communicator layer: names, argument checks,
// and the grouped send/receive exchange step.
#include "runtime/comm.h"

#include <algorithm>
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

int64_t check_gatherv(const Communicator& comm, int64_t send_count, const std::vector<int64_t>& recv_counts, int root) {
  check_peer(comm, root, "gatherv root");
  check_count(comm, send_count, "gatherv");
  if (comm.rank() != root) return 0;
  PF_REQUIRE(CommError, static_cast<int64_t>(recv_counts.size()) == comm.size(),
             "gatherv: " << recv_counts.size() << " receive counts for " << comm.size() << " ranks on "
                         << comm_description(comm));
  int64_t total = 0;
  for (size_t r = 0; r < recv_counts.size(); ++r) {
    check_count(comm, recv_counts[r], "gatherv");
    total += recv_counts[r];
  }
  PF_REQUIRE(CommError, recv_counts[static_cast<size_t>(root)] == send_count,
             "gatherv: the root sends " << send_count << " elements but its receive counts say "
                                        << recv_counts[static_cast<size_t>(root)] << " on " << comm_description(comm));
  return total;
}

int64_t gatherv_offset(const std::vector<int64_t>& recv_counts, int r) {
  int64_t offset = 0;
  for (int i = 0; i < r; ++i) offset += recv_counts[static_cast<size_t>(i)];
  return offset;
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

namespace {

// `bytes` of device memory on comm's stream for f(staged), released on every
// path (the allocation is ordered on the tracker's stream, the release on
// comm's). f leaves the results in place and synchronises the stream.
template <typename F>
void with_device_staging(Communicator& comm, MemoryTracker& tracker, int64_t bytes, F f) {
  const Stream s = comm.stream();
  void* staged = device_allocate(tracker, std::max<int64_t>(bytes, 1), "comm.host_values");
  stream_wait_stream(s, tracker.stream());
  try {
    f(staged);
  } catch (...) {
    device_free(tracker, staged, std::max<int64_t>(bytes, 1), "comm.host_values", &s);
    throw;
  }
  device_free(tracker, staged, std::max<int64_t>(bytes, 1), "comm.host_values", &s);
}

}  // namespace

void reduce_host_values(Communicator& comm, void* values, int64_t count, DType dtype, ReduceOp op, int root,
                        MemoryTracker& tracker) {
  if (comm.device().is_cpu()) {
    comm.reduce(values, values, count, dtype, op, root);
    synchronize(comm.stream());
    return;
  }
  const int64_t bytes = count * dtype_size(dtype);
  const Stream s = comm.stream();
  with_device_staging(comm, tracker, bytes, [&](void* staged) {
    copy_bytes(s, staged, comm.device(), values, Device::cpu(), bytes);
    comm.reduce(staged, staged, count, dtype, op, root);
    if (comm.rank() == root) copy_bytes(s, values, Device::cpu(), staged, comm.device(), bytes);
    synchronize(s);
  });
}

void gatherv_host_values(Communicator& comm, const void* send, int64_t send_count, void* recv,
                         const std::vector<int64_t>& recv_counts, DType dtype, int root, MemoryTracker& tracker) {
  if (comm.device().is_cpu()) {
    comm.gatherv(send, send_count, recv, recv_counts, dtype, root);
    synchronize(comm.stream());
    return;
  }
  // One device buffer: the root's receive (its own block at its place, so
  // the gather is in place there), a sender's own block elsewhere.
  const bool is_root = comm.rank() == root;
  const int64_t element = dtype_size(dtype);
  const int64_t total = detail::check_gatherv(comm, send_count, recv_counts, root);
  const int64_t own = is_root ? detail::gatherv_offset(recv_counts, root) : 0;
  const Stream s = comm.stream();
  with_device_staging(comm, tracker, (is_root ? total : send_count) * element, [&](void* staged) {
    char* mine = static_cast<char*>(staged) + own * element;
    copy_bytes(s, mine, comm.device(), send, Device::cpu(), send_count * element);
    comm.gatherv(mine, send_count, is_root ? staged : nullptr, recv_counts, dtype, root);
    if (is_root) copy_bytes(s, recv, Device::cpu(), staged, comm.device(), total * element);
    synchronize(s);
  });
}

}  // namespace pf
