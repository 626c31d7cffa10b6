// Communicators: point-to-point and collective transfers of typed buffers
// (void* + int64_t element count + DType) among the ranks of a group.
//
// Contract: all collective calls (allgather, allreduce, broadcast, reduce,
// gatherv, barrier, group_begin/group_end, split, and the scans built on them)
// are made in the same order on every rank of the group, with the same counts
// and dtypes (gatherv: each rank's own count, which the root's counts repeat).
//
// Group semantics (NCCL's, on every backend): between group_begin() and
// group_end() sends, receives and collectives are only posted; they may
// complete in any order, and their buffers may be read or reused only after
// the matching group_end(). Groups nest; only the outermost group_end()
// completes the operations. Outside a group every call is blocking: it returns
// once its buffers may be used. So two ranks that exchange data must post the
// send and the receive inside one group, or the exchange may deadlock, on every
// backend alike. barrier() and split() are not allowed inside a group.
//
// Completion and streams (stream_ordered()): a host-blocking communicator
// (local; MPI with synchronous CPU streams) has the bytes in place when the
// call (or group_end) returns, and reads its inputs at the call. A
// stream-ordered one (NCCL; MPI with asynchronous CPU streams) queues its work
// on stream() and completes it there. For both, a caller whose inputs were
// written on another stream first makes stream() wait for that stream
// (stream_wait_stream, which on a host-blocking communicator makes the host
// wait), and work on another stream that needs a result waits for stream()
// the same way; the host must synchronize(stream()) before reading results.
//
// Backends:
//   make_local_comm(device)  one rank; sends to self match receives in a group
//   make_mpi_comm(comm)      host buffers over a duplicate of an MPI_Comm
//   make_nccl_comm(comm)     CUDA buffers; NCCL bootstrapped over an MPI_Comm,
//                            one GPU per rank chosen from the node-local rank
//   make_staged_comm(comm, device, streams)
//                            buffers on any device, staged through the host
//                            and moved over MPI (ranks sharing one GPU)
// (the last three are declared in runtime/comm_mpi.h, which includes <mpi.h>).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/memory.h"

namespace pf {

enum class ReduceOp { Sum, Max, Min };

// The MPI thread level a communicator needs: only the thread that made MPI
// (Funneled), or several threads at once (Multiple: MPI calls on stream
// workers while the main thread makes others).
enum class ThreadSupport { Funneled, Multiple };
const char* reduce_op_name(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where the buffers passed to this communicator live.
  virtual Device device() const = 0;
  // The stream the communicator's work runs on (a no-op token on host backends).
  virtual Stream stream() const = 0;
  // "local", "mpi", "nccl" or "staged", for messages.
  virtual const char* backend_name() const = 0;
  // True when work is queued on stream() and completes there (see the top).
  virtual bool stream_ordered() const = 0;
  // True when an operation holds the calling thread until its transfer is
  // done, so that its whole time is exposed to the caller (timings): the
  // host-blocking backends, and the staged one on a GPU.
  virtual bool holds_caller() const { return !stream_ordered(); }
  virtual ThreadSupport thread_support_needed() const = 0;

  // Point to point. Messages between one pair of ranks match in posting order;
  // the receive's count and dtype must equal the send's.
  virtual void send(const void* buf, int64_t count, DType dtype, int peer) = 0;
  virtual void recv(void* buf, int64_t count, DType dtype, int peer) = 0;

  // recv holds size() blocks of count_per_rank elements, block r from rank r.
  // In place when send == recv + rank() * count_per_rank elements.
  virtual void allgather(const void* send, void* recv, int64_t count_per_rank, DType dtype) = 0;
  // Elementwise reduction over ranks; in place when send == recv.
  virtual void allreduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) = 0;
  virtual void broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  // Rooted collectives: `recv` is read and written on `root` only (the other
  // ranks may pass nullptr).
  // Elementwise reduction over ranks into root's recv; in place on root when
  // send == recv.
  virtual void reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root) = 0;
  // A gather of variable counts: each rank sends send_count elements; root's
  // recv holds them in rank order, rank r's after those of ranks 0..r-1
  // (sum of recv_counts elements). recv_counts (size() entries, entry r equal
  // to rank r's send_count) is read on root only. In place on root when send
  // == recv + (the counts of the ranks before root) elements.
  virtual void gatherv(const void* send, int64_t send_count, void* recv, const std::vector<int64_t>& recv_counts,
                       DType dtype, int root) = 0;
  // Returns when every rank has entered it (and, on NCCL, its stream is idle).
  virtual void barrier() = 0;

  virtual void group_begin() = 0;
  virtual void group_end() = 0;

  // Collective: ranks with equal color form a new group, ordered by (key,
  // rank). A negative color means "no group": the result is nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

// Sends and receives `count` elements in one group: the common exchange step.
// Either peer may be negative (no transfer that side).
void send_recv(Communicator& comm, const void* send_buf, int send_peer, void* recv_buf, int recv_peer, int64_t count,
               DType dtype);

// Allreduce of a few values that live on the host, on any backend: NCCL
// communicators (device buffers) stage them through `tracker`'s device.
// Blocking: the result is in `values` on return.
void allreduce_host_values(Communicator& comm, void* values, int64_t count, DType dtype, ReduceOp op,
                           MemoryTracker& tracker);

// reduce and gatherv of values that live on the host, as allreduce_host_values:
// blocking, on any backend (device buffers staged through `tracker`'s
// device). reduce_host_values leaves the result in root's `values` (the other
// ranks' are unchanged); gatherv_host_values fills root's `recv`.
void reduce_host_values(Communicator& comm, void* values, int64_t count, DType dtype, ReduceOp op, int root,
                        MemoryTracker& tracker);
void gatherv_host_values(Communicator& comm, const void* send, int64_t send_count, void* recv,
                         const std::vector<int64_t>& recv_counts, DType dtype, int root, MemoryTracker& tracker);

// "rank R of P (backend on device)", for error messages.
std::string comm_description(const Communicator& comm);

// One rank; buffers on `device` (the host by default).
std::unique_ptr<Communicator> make_local_comm(Device device = Device::cpu());

}  // namespace pf
