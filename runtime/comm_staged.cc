// The staged communicator: buffers on a device (a GPU, or the CPU in tests),
// MPI in between. Every operation is a group of three steps:
//   1. its inputs are copied to host staging buffers on the device stream;
//   2. the inner MPI communicator, whose host stream first waits for those
//      copies, moves the staged bytes (posted in the inner group, completed at
//      its group_end, as the MPI backend always does);
//   3. the device stream waits for the inner stream, then copies the results
//      back into the device buffers.
// So the work is ordered on stream() exactly as NCCL's is, and the staging
// buffers are released on the inner stream once the device stream has passed
// the copies back. Ranks that share one GPU (where NCCL refuses) exchange
// through it; on CUDA the device stream's wait for the host (step 3) holds the
// launching thread until the MPI transfer is done (runtime/device.h: a CUDA
// stream waiting for a host event).
//
// A failed MPI operation is skipped-over work on the inner stream: the
// device stream then fails with a CommError (asynchronous CPU streams) or the
// launching thread rethrows the MPI error itself, so no result built from
// stale staging bytes goes unreported.
#include <atomic>
#include <utility>
#include <vector>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_impl.h"
#include "runtime/comm_mpi.h"

namespace pf {
namespace {

using Staging = std::vector<char>;

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> inner, Device device, const HostStreamConfig& streams)
      : inner_(std::move(inner)), device_(device), streams_(streams) {
    stream_ = create_stream(device_, streams_);
  }

  ~StagedCommunicator() override {
    destroy_stream(stream_);  // runs the copies back; the inner stream then releases the staging
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Device device() const override { return device_; }
  Stream stream() const override { return stream_; }
  const char* backend_name() const override { return "staged"; }
  bool stream_ordered() const override { return stream_is_async(stream_); }
  // A CUDA stream cannot wait for the host: the caller waits in finish().
  bool holds_caller() const override { return stream_.device.is_cuda() || !stream_ordered(); }
  ThreadSupport thread_support_needed() const override { return inner_->thread_support_needed(); }

  void send(const void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "send");
    detail::check_count(*this, count, "send");
    Op op(*this);
    char* h = stage_in(buf, bytes(count, dtype));
    inner([&] { inner_->send(h, count, dtype, peer); });
  }

  void recv(void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "recv");
    detail::check_count(*this, count, "recv");
    Op op(*this);
    char* h = hold(bytes(count, dtype));
    inner([&] { inner_->recv(h, count, dtype, peer); });
    stage_out(buf, h, bytes(count, dtype));
  }

  void allgather(const void* send, void* recv, int64_t count_per_rank, DType dtype) override {
    detail::check_count(*this, count_per_rank, "allgather");
    Op op(*this);
    const int64_t block = bytes(count_per_rank, dtype);
    char* h = hold(block * size());
    char* own = h + block * rank();
    copy_in(own, send, block);
    inner([&] { inner_->allgather(own, h, count_per_rank, dtype); });
    stage_out(recv, h, block * size());
  }

  void allreduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp reduce) override {
    detail::check_count(*this, count, "allreduce");
    Op op(*this);
    char* h = stage_in(send, bytes(count, dtype));
    inner([&] { inner_->allreduce(h, h, count, dtype, reduce); });
    stage_out(recv, h, bytes(count, dtype));
  }

  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    detail::check_peer(*this, root, "broadcast root");
    detail::check_count(*this, count, "broadcast");
    Op op(*this);
    char* h = rank() == root ? stage_in(buf, bytes(count, dtype)) : hold(bytes(count, dtype));
    inner([&] { inner_->broadcast(h, count, dtype, root); });
    stage_out(buf, h, bytes(count, dtype));
  }

  void reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp reduce, int root) override {
    detail::check_peer(*this, root, "reduce root");
    detail::check_count(*this, count, "reduce");
    Op op(*this);
    char* h = stage_in(send, bytes(count, dtype));
    inner([&] { inner_->reduce(h, h, count, dtype, reduce, root); });
    if (rank() == root) stage_out(recv, h, bytes(count, dtype));
  }

  void gatherv(const void* send, int64_t send_count, void* recv, const std::vector<int64_t>& recv_counts, DType dtype,
               int root) override {
    const int64_t total = detail::check_gatherv(*this, send_count, recv_counts, root);
    Op op(*this);
    if (rank() != root) {
      char* h = stage_in(send, bytes(send_count, dtype));
      inner([&] { inner_->gatherv(h, send_count, nullptr, recv_counts, dtype, root); });
      return;
    }
    // The root's own block goes to its place in the staging: in place there.
    char* h = hold(bytes(total, dtype));
    char* own = h + bytes(detail::gatherv_offset(recv_counts, root), dtype);
    copy_in(own, send, bytes(send_count, dtype));
    inner([&] { inner_->gatherv(own, send_count, h, recv_counts, dtype, root); });
    stage_out(recv, h, bytes(total, dtype));
  }

  void barrier() override {
    detail::check_not_in_group(*this, depth_, "barrier");
    synchronize(stream_);
    inner([&] { inner_->barrier(); });
  }

  void group_begin() override {
    inner([&] { inner_->group_begin(); });
    ++depth_;
  }

  void group_end() override {
    detail::check_group_open(*this, depth_);
    --depth_;
    try {
      inner([&] { inner_->group_end(); });
    } catch (...) {
      if (depth_ == 0) {
        // No copies back from staging the failed transfer never filled; the
        // staging itself is released in the inner stream's order, after
        // whatever of the group was already queued there.
        copy_back_.clear();
        std::vector<std::shared_ptr<Staging>> released;
        released.swap(staging_);
        inner([&] { host_launch(inner_->stream(), [released = std::move(released)] {}); });
      }
      throw;
    }
    if (depth_ == 0) finish();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    detail::check_not_in_group(*this, depth_, "split");
    synchronize(stream_);
    std::unique_ptr<Communicator> sub;
    inner([&] { sub = inner_->split(color, key); });
    if (!sub) return nullptr;
    return std::make_unique<StagedCommunicator>(std::move(sub), device_, streams_);
  }

 private:
  // One operation outside a group is a group of its own.
  class Op {
   public:
    explicit Op(StagedCommunicator& c) : c_(c) { c_.group_begin(); }
    ~Op() noexcept(false) {
      if (std::uncaught_exceptions() == 0) {
        c_.group_end();
        return;
      }
      try {
        c_.group_end();  // keeps the group depth right; the first error is the one reported
      } catch (...) {
      }
    }
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;

   private:
    StagedCommunicator& c_;
  };

  struct CopyBack {
    void* dst;
    const char* src;
    int64_t bytes;
  };

  static int64_t bytes(int64_t count, DType dtype) { return count * dtype_size(dtype); }

  // Calls on the inner communicator launch on its host stream, so the thread
  // binds the host for them (it may have bound the GPU).
  template <class F>
  void inner(F&& f) {
    DeviceGuard host(Device::cpu());
    f();
  }

  char* hold(int64_t n) {
    staging_.push_back(std::make_shared<Staging>(static_cast<size_t>(n)));
    return staging_.back()->data();
  }

  // A host copy of `n` device bytes, made in the device stream's order; the
  // inner stream waits for it before its MPI call reads it.
  char* stage_in(const void* src, int64_t n) {
    char* h = hold(n);
    copy_in(h, src, n);
    return h;
  }
  void copy_in(char* host, const void* src, int64_t n) {
    copy_bytes(stream_, host, Device::cpu(), src, device_, n);
    inner([&] { stream_wait_stream(inner_->stream(), stream_); });
  }

  void stage_out(void* dst, const char* src, int64_t n) { copy_back_.push_back({dst, src, n}); }

  // After the outermost group_end: the device stream waits for the transfers,
  // checks that they ran, copies the results back, and the inner stream
  // releases the staging once those copies are done.
  void finish() {
    // Taken first: after a failed transfer the next operation must not copy
    // this one's results back again.
    std::vector<CopyBack> copy_back;
    copy_back.swap(copy_back_);
    std::vector<std::shared_ptr<Staging>> released;
    released.swap(staging_);
    auto ran = std::make_shared<std::atomic<bool>>(false);
    inner([&] {
      host_launch(inner_->stream(), [ran] { ran->store(true); });  // skipped after a failed transfer
    });
    stream_wait_stream(stream_, inner_->stream());
    if (stream_.device.is_cpu() && stream_is_async(stream_)) {
      const std::string where = comm_description(*this);
      host_launch(stream_, [ran, where] {
        PF_REQUIRE(CommError, ran->load(),
                   "an MPI transfer of the staged communicator failed (" << where
                                                                         << "); its own error is rethrown by the "
                                                                            "communicator's next barrier or split");
      });
    } else if (!ran->load()) {
      inner([&] { synchronize(inner_->stream()); });  // the host waited above: this rethrows the MPI error
    }
    for (const CopyBack& c : copy_back) copy_bytes(stream_, c.dst, device_, c.src, Device::cpu(), c.bytes);
    inner([&] {
      stream_wait_stream(inner_->stream(), stream_);
      host_launch(inner_->stream(), [released = std::move(released)] {});
    });
  }

  std::unique_ptr<Communicator> inner_;
  Device device_;
  HostStreamConfig streams_;
  Stream stream_;
  int depth_ = 0;
  std::vector<std::shared_ptr<Staging>> staging_;
  std::vector<CopyBack> copy_back_;
};

}  // namespace

std::unique_ptr<Communicator> make_staged_comm(MPI_Comm comm, Device device, const HostStreamConfig& streams,
                                               Watchdog* watchdog) {
  PF_REQUIRE(CommError, !device.is_cuda() || cuda_device_count() > device.index,
             "a staged communicator on " << device.str() << " was requested, but "
                                         << (cuda_device_count() == 0 ? cuda_unavailable_reason()
                                                                      : "that GPU does not exist"));
  std::unique_ptr<Communicator> inner;
  {
    DeviceGuard host(Device::cpu());
    inner = make_mpi_comm(comm, streams, watchdog);
  }
  return std::make_unique<StagedCommunicator>(std::move(inner), device, streams);
}

}  // namespace pf
