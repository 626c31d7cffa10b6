// The NCCL communicator: CUDA buffers, work enqueued on the communicator's
// own stream. Bootstrapped over MPI (never CUDA-aware MPI): rank 0 creates the
// unique id, MPI_Bcast shares it, and the GPU is the node-local rank (from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)). group_begin/group_end are
// ncclGroupStart/ncclGroupEnd; barrier() drains the stream and meets on MPI.
// split() splits the MPI bootstrap communicator and the NCCL one with the same
// color and key (ncclCommSplit; before NCCL 2.18, a new NCCL communicator
// bootstrapped over the split MPI one). If rank 0 cannot make the unique id,
// every rank fails with its message rather than waiting in the broadcast.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <memory>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/comm_impl.h"
#include "runtime/comm_nccl.cuh"
#include "runtime/cuda_check.cuh"
#include "runtime/watchdog.h"

namespace pf {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f64: return ncclFloat64;
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::u8: return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

// Rank 0 of `mpi` makes the unique id; every rank gets it, or every rank
// throws NcclError with rank 0's message (the result travels with the id).
ncclUniqueId shared_unique_id(MPI_Comm mpi) {
  struct {
    int result;
    char message[240];
    ncclUniqueId id;
  } shared{};
  int rank = 0;
  PF_MPI_CHECK(MPI_Comm_rank(mpi, &rank));
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&shared.id);
    shared.result = static_cast<int>(r);
    if (r != ncclSuccess) std::snprintf(shared.message, sizeof shared.message, "%s", nccl_error_text(r).c_str());
  }
  PF_MPI_CHECK(MPI_Bcast(&shared, static_cast<int>(sizeof shared), MPI_BYTE, 0, mpi));
  PF_REQUIRE(NcclError, shared.result == ncclSuccess,
             "ncclGetUniqueId failed on rank 0 of the NCCL bootstrap: " << shared.message
                                                                          << " (seen on rank " << rank << ")");
  return shared.id;
}

bool mpi_usable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `mpi` and `nccl`, created for `device`.
  NcclCommunicator(MPI_Comm mpi, ncclComm_t nccl, Device device, Watchdog* watchdog)
      : mpi_(mpi), nccl_(nccl), device_(device), watchdog_(watchdog) {
    PF_MPI_CHECK(MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN));
    PF_MPI_CHECK(MPI_Comm_rank(mpi_, &rank_));
    PF_MPI_CHECK(MPI_Comm_size(mpi_, &size_));
    PF_CUDA_CHECK(cudaSetDevice(device_.index));
    PF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    where_ = " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (nccl)";
    // The hook runs on the watchdog's thread, which has no device of its own.
    const int index = device_.index;
    if (watchdog_)
      abort_hook_ = watchdog_->add_abort_hook([nccl, index] {
        cudaSetDevice(index);
        ncclCommAbort(nccl);
      });
  }

  ~NcclCommunicator() override {
    // Removal waits for a running abort; an aborted communicator is freed.
    const bool aborted = watchdog_ && !watchdog_->remove_abort_hook(abort_hook_);
    on_device(device_.index, [&] {
      if (nccl_ && !aborted) ncclCommDestroy(nccl_);
      if (stream_) cudaStreamDestroy(stream_);
    });
    if (mpi_usable()) MPI_Comm_free(&mpi_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }
  Stream stream() const override { return Stream{device_, stream_}; }
  const char* backend_name() const override { return "nccl"; }
  int watch_device() const { return watch_bound_->load(); }
  bool stream_ordered() const override { return true; }
  // MPI only bootstraps, on the creating thread.
  ThreadSupport thread_support_needed() const override { return ThreadSupport::Funneled; }

  void send(const void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "send");
    detail::check_count(*this, count, "send");
    PF_NCCL_CHECK(ncclSend(buf, static_cast<size_t>(count), nccl_type(dtype), peer, nccl_, stream_));
    watch("send", count, dtype, " to rank ", peer);
  }

  void recv(void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "recv");
    detail::check_count(*this, count, "recv");
    PF_NCCL_CHECK(ncclRecv(buf, static_cast<size_t>(count), nccl_type(dtype), peer, nccl_, stream_));
    watch("recv", count, dtype, " from rank ", peer);
  }

  void allgather(const void* send, void* recv, int64_t count_per_rank, DType dtype) override {
    detail::check_count(*this, count_per_rank, "allgather");
    PF_NCCL_CHECK(ncclAllGather(send, recv, static_cast<size_t>(count_per_rank), nccl_type(dtype), nccl_, stream_));
    watch("allgather", count_per_rank, dtype);
  }

  void allreduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) override {
    detail::check_count(*this, count, "allreduce");
    PF_NCCL_CHECK(ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), nccl_, stream_));
    watch("allreduce", count, dtype);
  }

  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    detail::check_peer(*this, root, "broadcast root");
    detail::check_count(*this, count, "broadcast");
    PF_NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(dtype), root, nccl_, stream_));
    watch("broadcast", count, dtype, " from rank ", root);
  }

  void reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root) override {
    detail::check_peer(*this, root, "reduce root");
    detail::check_count(*this, count, "reduce");
    PF_NCCL_CHECK(ncclReduce(send, rank_ == root ? recv : nullptr, static_cast<size_t>(count), nccl_type(dtype),
                             nccl_op(op), root, nccl_, stream_));
    watch("reduce", count, dtype, " to rank ", root);
  }

  // NCCL has no gather of variable counts: one group of sends to the root and
  // its receives (zero counts post nothing, on both sides alike), and the
  // root's own block copied on the stream unless it is in place.
  void gatherv(const void* send, int64_t send_count, void* recv, const std::vector<int64_t>& recv_counts, DType dtype,
               int root) override {
    detail::check_gatherv(*this, send_count, recv_counts, root);
    const ncclDataType_t t = nccl_type(dtype);
    const int64_t element = dtype_size(dtype);
    if (rank_ != root) {
      if (send_count > 0) {
        PF_NCCL_CHECK(ncclSend(send, static_cast<size_t>(send_count), t, root, nccl_, stream_));
        watch("gatherv", send_count, dtype, " to rank ", root);
      }
      return;
    }
    char* base = static_cast<char*>(recv);
    char* own = base + detail::gatherv_offset(recv_counts, root) * element;
    if (send != own && send_count > 0)
      PF_CUDA_CHECK(
          cudaMemcpyAsync(own, send, static_cast<size_t>(send_count * element), cudaMemcpyDeviceToDevice, stream_));
    PF_NCCL_CHECK(ncclGroupStart());
    ++depth_;  // the receives are one group (named together for the watchdog)
    try {
      int64_t offset = 0;
      for (int r = 0; r < size_; ++r) {
        const int64_t n = recv_counts[static_cast<size_t>(r)];
        if (r != root && n > 0) {
          PF_NCCL_CHECK(ncclRecv(base + offset * element, static_cast<size_t>(n), t, r, nccl_, stream_));
          watch("gatherv", n, dtype, " from rank ", r);
        }
        offset += n;
      }
    } catch (...) {
      --depth_;
      ncclGroupEnd();
      throw;
    }
    group_end();
  }

  void barrier() override {
    detail::check_not_in_group(*this, depth_, "barrier");
    Watchdog::Op wait(watchdog_, watchdog_ ? "barrier" + where_ : std::string());
    PF_CUDA_CHECK(cudaStreamSynchronize(stream_));
    PF_MPI_CHECK(MPI_Barrier(mpi_));
  }

  void group_begin() override {
    PF_NCCL_CHECK(ncclGroupStart());
    ++depth_;
  }

  void group_end() override {
    detail::check_group_open(*this, depth_);
    --depth_;
    PF_NCCL_CHECK(ncclGroupEnd());
    if (depth_ == 0 && watchdog_ && watchdog_->enabled()) {
      watch_stream("group (" + group_what_ + ")");
      group_what_.clear();
    }
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    detail::check_not_in_group(*this, depth_, "split");
    PF_CUDA_CHECK(cudaSetDevice(device_.index));
    MPI_Comm sub = MPI_COMM_NULL;
    PF_MPI_CHECK(MPI_Comm_split(mpi_, color < 0 ? MPI_UNDEFINED : color, key, &sub));
    ncclComm_t nccl_sub = nullptr;
#if PF_NCCL_HAS_COMM_SPLIT
    PF_NCCL_CHECK(ncclCommSplit(nccl_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nccl_sub, nullptr));
    if (sub == MPI_COMM_NULL) return nullptr;
#else
    if (sub == MPI_COMM_NULL) return nullptr;
    PF_MPI_CHECK(MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN));
    int sub_rank = 0, sub_size = 1;
    PF_MPI_CHECK(MPI_Comm_rank(sub, &sub_rank));
    PF_MPI_CHECK(MPI_Comm_size(sub, &sub_size));
    const ncclUniqueId id = shared_unique_id(sub);
    PF_NCCL_CHECK(ncclCommInitRank(&nccl_sub, sub_size, id, sub_rank));
#endif
    return std::make_unique<NcclCommunicator>(sub, nccl_sub, device_, watchdog_);
  }

 private:
  // An operation just queued: outside a group, watched until the stream has
  // done it; inside one, named in the group's description.
  void watch(const char* op, int64_t count, DType dtype, const char* peer_word = "", int peer = -1) {
    if (!watchdog_ || !watchdog_->enabled()) return;
    std::string what = std::string(op) + " of " + std::to_string(count) + " x " + dtype_name(dtype) + " (" +
                       std::to_string(count * static_cast<int64_t>(dtype_size(dtype))) + " B)";
    if (peer >= 0) what += peer_word + std::to_string(peer);
    if (depth_ > 0) {
      group_what_ += (group_what_.empty() ? "" : ", ") + what;
      return;
    }
    watch_stream(what);
  }

  // The event is polled on the watchdog's thread, which binds this
  // communicator's device first (else the runtime would make a context on
  // GPU 0 there: another GPU's event, or a refusal in exclusive-process mode
  // that would read as done). It is destroyed, with its device bound, when
  // the watch ends: completed, or dropped with the watchdog.
  void watch_stream(const std::string& what) {
    cudaEvent_t raw = nullptr;
    PF_CUDA_CHECK(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming));
    const int index = device_.index;
    std::shared_ptr<CUevent_st> event(raw, [index](cudaEvent_t e) { on_device(index, [e] { cudaEventDestroy(e); }); });
    PF_CUDA_CHECK(cudaEventRecord(raw, stream_));
    watchdog_->watch_async(what + where_, [event, index, bound = watch_bound_] {
      if (cudaSetDevice(index) != cudaSuccess) return false;  // still watched: the timeout decides
      int current = -1;
      cudaGetDevice(&current);
      bound->store(current);
      return cudaEventQuery(event.get()) != cudaErrorNotReady;
    });
  }

  // f() with `index` as the calling thread's device, the thread's own
  // device restored after.
  template <typename F>
  static void on_device(int index, F f) {
    int previous = -1;
    const bool had = cudaGetDevice(&previous) == cudaSuccess;
    cudaSetDevice(index);
    f();
    if (had && previous != index) cudaSetDevice(previous);
  }

  MPI_Comm mpi_;
  ncclComm_t nccl_;
  Device device_;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int depth_ = 0;
  Watchdog* watchdog_ = nullptr;
  int abort_hook_ = 0;
  // The device the watchdog's thread found bound when it last polled one of
  // this communicator's events (-1 before): nccl_watch_device() for tests.
  std::shared_ptr<std::atomic<int>> watch_bound_ = std::make_shared<std::atomic<int>>(-1);
  std::string where_;       // " on rank R of P (nccl)"
  std::string group_what_;  // the operations of the open group
};

}  // namespace

int nccl_watch_device(const Communicator& comm) {
  const auto* nccl = dynamic_cast<const NcclCommunicator*>(&comm);
  return nccl ? nccl->watch_device() : -1;
}

std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm comm, Watchdog* watchdog) {
  PF_REQUIRE(CommError, mpi_usable(), "an NCCL communicator was requested, but MPI (its bootstrap) is not initialised");
  PF_REQUIRE(CommError, comm != MPI_COMM_NULL, "make_nccl_comm given MPI_COMM_NULL");
  MPI_Comm mpi = MPI_COMM_NULL;
  PF_MPI_CHECK(MPI_Comm_dup(comm, &mpi));
  PF_MPI_CHECK(MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN));
  int rank = 0, size = 1;
  PF_MPI_CHECK(MPI_Comm_rank(mpi, &rank));
  PF_MPI_CHECK(MPI_Comm_size(mpi, &size));

  // The GPU comes from the rank among the processes of this node.
  MPI_Comm node = MPI_COMM_NULL;
  PF_MPI_CHECK(MPI_Comm_split_type(mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  const int gpus = cuda_device_count();
  // Every rank decides the same way (node sizes are known everywhere), so a
  // node without enough GPUs fails on all ranks instead of hanging the others.
  int short_of_gpus = gpus < local_size ? 1 : 0, any_short = 0;
  PF_MPI_CHECK(MPI_Allreduce(&short_of_gpus, &any_short, 1, MPI_INT, MPI_MAX, mpi));
  if (any_short) MPI_Comm_free(&mpi);
  PF_REQUIRE(CommError, !short_of_gpus,
             "NCCL needs one GPU per rank, but this node runs "
                 << local_size << " ranks and has " << gpus << " usable GPUs"
                 << (gpus == 0 ? " (" + cuda_unavailable_reason() + ")" : std::string()));
  PF_REQUIRE(CommError, !any_short, "another node has fewer GPUs than ranks; NCCL was not started on any rank");
  const Device device = Device::cuda(local_rank);
  PF_CUDA_CHECK(cudaSetDevice(device.index));

  ncclUniqueId id;
  try {
    id = shared_unique_id(mpi);
  } catch (...) {
    MPI_Comm_free(&mpi);
    throw;
  }
  ncclComm_t nccl = nullptr;
  PF_NCCL_CHECK(ncclCommInitRank(&nccl, size, id, rank));
  return std::make_unique<NcclCommunicator>(mpi, nccl, device, watchdog);
}

}  // namespace pf
