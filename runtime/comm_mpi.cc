// The MPI communicator: host buffers over a private duplicate of an MPI_Comm
// whose error handler returns codes (turned into MpiError by PF_MPI_CHECK).
// Every operation is posted non-blocking (MPI_Isend, MPI_Irecv,
// MPI_Iallreduce, ...): inside a group it is completed at the outermost
// group_end, outside a group at once, so a reduction runs the same algorithm
// (and gives the same bits) grouped or not, in either stream mode.
//
// Every MPI call of an operation runs on the communicator's stream: at once
// on the calling thread with synchronous host streams (complete on return),
// or queued on its own HostStream worker with asynchronous ones, where it
// completes in stream order exactly as NCCL's work does on its CUDA stream.
// Only that worker touches pending requests; argument checks run at the call.
//
// Every wait (of one operation, of a group at its end, of a barrier) is an
// operation of the watchdog, when there is one (runtime/watchdog.h), named by
// what it waits for: the operation, its size, its peer and the communicator.
#include "runtime/comm_mpi.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_impl.h"
#include "runtime/watchdog.h"

namespace pf {
namespace {

constexpr int kTag = 0x5043;  // one tag: point-to-point messages match in posting order per pair

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f64: return MPI_DOUBLE;
    case DType::f32: return MPI_FLOAT;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;  // moved as bits; reductions are refused
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    case DType::u8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

bool mpi_usable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (a communicator this library created).
  MpiCommunicator(MPI_Comm comm, const HostStreamConfig& streams, Watchdog* watchdog)
      : comm_(comm), streams_(streams), watchdog_(watchdog) {
    PF_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    PF_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    PF_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    stream_ = create_stream(Device::cpu(), streams_);
    where_ = " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (mpi)";
  }

  ~MpiCommunicator() override {
    destroy_stream(stream_);  // runs what is queued
    if (!mpi_usable()) return;
    if (!pending_.empty()) MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE);
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cpu(); }
  Stream stream() const override { return stream_; }
  const char* backend_name() const override { return "mpi"; }
  bool stream_ordered() const override { return stream_is_async(stream_); }
  ThreadSupport thread_support_needed() const override {
    return stream_ordered() ? ThreadSupport::Multiple : ThreadSupport::Funneled;
  }

  void send(const void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "send");
    detail::check_int_count(*this, count, "send");
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpi_type(dtype);
    issue(what("send", count, dtype, " to rank ", peer),
          [=](MPI_Request* r) { PF_MPI_CHECK(MPI_Isend(buf, n, t, peer, kTag, comm_, r)); });
  }

  void recv(void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "recv");
    detail::check_int_count(*this, count, "recv");
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpi_type(dtype);
    issue(what("recv", count, dtype, " from rank ", peer),
          [=](MPI_Request* r) { PF_MPI_CHECK(MPI_Irecv(buf, n, t, peer, kTag, comm_, r)); });
  }

  void allgather(const void* send, void* recv, int64_t count_per_rank, DType dtype) override {
    detail::check_int_count(*this, count_per_rank * size_, "allgather");
    const int n = static_cast<int>(count_per_rank);
    const auto* own = static_cast<const char*>(recv) + static_cast<int64_t>(rank_) * count_per_rank * dtype_size(dtype);
    const void* src = send == own ? MPI_IN_PLACE : send;
    const MPI_Datatype t = mpi_type(dtype);
    issue(what("allgather", count_per_rank, dtype),
          [=](MPI_Request* r) { PF_MPI_CHECK(MPI_Iallgather(src, n, t, recv, n, t, comm_, r)); });
  }

  void allreduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) override {
    detail::check_int_count(*this, count, "allreduce");
    PF_REQUIRE(CommError, dtype != DType::f16 && dtype != DType::bf16,
               "allreduce (" << reduce_op_name(op) << ") of " << dtype_name(dtype)
                             << " is not supported by the MPI backend (no half-precision arithmetic in MPI) on "
                             << comm_description(*this));
    const void* src = send == recv ? MPI_IN_PLACE : send;
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpi_type(dtype);
    const MPI_Op o = mpi_op(op);
    issue(what("allreduce", count, dtype),
          [=](MPI_Request* r) { PF_MPI_CHECK(MPI_Iallreduce(src, recv, n, t, o, comm_, r)); });
  }

  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    detail::check_peer(*this, root, "broadcast root");
    detail::check_int_count(*this, count, "broadcast");
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpi_type(dtype);
    issue(what("broadcast", count, dtype, " from rank ", root),
          [=](MPI_Request* r) { PF_MPI_CHECK(MPI_Ibcast(buf, n, t, root, comm_, r)); });
  }

  void reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op, int root) override {
    detail::check_peer(*this, root, "reduce root");
    detail::check_int_count(*this, count, "reduce");
    PF_REQUIRE(CommError, dtype != DType::f16 && dtype != DType::bf16,
               "reduce (" << reduce_op_name(op) << ") of " << dtype_name(dtype)
                          << " is not supported by the MPI backend (no half-precision arithmetic in MPI) on "
                          << comm_description(*this));
    const void* src = send == recv && rank_ == root ? MPI_IN_PLACE : send;
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpi_type(dtype);
    const MPI_Op o = mpi_op(op);
    issue(what("reduce", count, dtype, " to rank ", root),
          [=](MPI_Request* r) { PF_MPI_CHECK(MPI_Ireduce(src, recv, n, t, o, root, comm_, r)); });
  }

  void gatherv(const void* send, int64_t send_count, void* recv, const std::vector<int64_t>& recv_counts, DType dtype,
               int root) override {
    const int64_t total = detail::check_gatherv(*this, send_count, recv_counts, root);
    detail::check_int_count(*this, std::max(send_count, total), "gatherv");
    // MPI reads the counts and displacements until the gather completes: they
    // live as long as the operation (past the lambda when it is grouped).
    auto layout = std::make_shared<std::vector<int>>();
    if (rank_ == root) {
      layout->resize(2 * static_cast<size_t>(size_));
      for (int r = 0; r < size_; ++r) {
        (*layout)[static_cast<size_t>(r)] = static_cast<int>(recv_counts[static_cast<size_t>(r)]);
        (*layout)[static_cast<size_t>(size_ + r)] = static_cast<int>(detail::gatherv_offset(recv_counts, r));
      }
    }
    const auto* own = static_cast<const char*>(recv) +
                      (rank_ == root ? (*layout)[static_cast<size_t>(size_ + root)] * dtype_size(dtype) : 0);
    const void* src = rank_ == root && send == own ? MPI_IN_PLACE : send;
    const int n = static_cast<int>(send_count);
    const MPI_Datatype t = mpi_type(dtype);
    const int ranks = size_;
    issue(
        what("gatherv", rank_ == root ? total : send_count, dtype, " to rank ", root),
        [=](MPI_Request* r) {
          const int* counts = layout->empty() ? nullptr : layout->data();
          const int* displs = layout->empty() ? nullptr : layout->data() + ranks;
          PF_MPI_CHECK(MPI_Igatherv(src, n, t, recv, counts, displs, t, root, comm_, r));
        },
        layout);
  }

  void barrier() override {
    detail::check_not_in_group(*this, depth_, "barrier");
    synchronize(stream_);
    Watchdog::Op wait(watchdog_, "barrier" + where_);
    PF_MPI_CHECK(MPI_Barrier(comm_));
  }

  void group_begin() override { ++depth_; }

  void group_end() override {
    detail::check_group_open(*this, depth_);
    if (--depth_ > 0) return;
    run([this] {
      std::vector<MPI_Request> requests;
      requests.swap(pending_);
      std::string names;
      names.swap(pending_what_);
      std::vector<std::shared_ptr<const void>> held;
      held.swap(pending_held_);  // released once the group's requests are done
      if (requests.empty()) return;
      Watchdog::Op wait(watchdog_, watchdog_ ? "group of " + std::to_string(requests.size()) + " (" + names + ")" : "");
      if (stream_ordered())
        wait_politely(requests.data(), static_cast<int>(requests.size()));
      else
        PF_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
    });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    detail::check_not_in_group(*this, depth_, "split");
    synchronize(stream_);
    MPI_Comm sub = MPI_COMM_NULL;
    PF_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub));
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(sub, streams_, watchdog_);
  }

 private:
  // One operation's MPI calls, on the stream (see the top of the file).
  void run(std::function<void()> op) { host_launch(stream_, std::move(op)); }

  // One operation, always in its non-blocking form, so that a reduction runs
  // the same algorithm (and gives the same bits) in every mode: inside a group
  // it completes at the outermost group_end; outside, at once, with MPI_Wait
  // on a synchronous stream or a polite wait on the stream's worker.
  // `held`: what MPI reads until the operation completes (gatherv's counts),
  // kept alive that long.
  void issue(std::string what, std::function<void(MPI_Request*)> post_op, std::shared_ptr<const void> held = nullptr) {
    if (depth_ > 0) {
      run([this, post_op, held, what = std::move(what)] {
        post_op(post());
        if (held) pending_held_.push_back(held);
        if (watchdog_) pending_what_ += (pending_what_.empty() ? "" : ", ") + what;
      });
      return;
    }
    const bool worker = stream_ordered();
    run([this, post_op, worker, held, what = std::move(what)] {
      MPI_Request r = MPI_REQUEST_NULL;
      post_op(&r);
      Watchdog::Op wait(watchdog_, watchdog_ ? what + where_ : std::string());
      if (worker)
        wait_politely(&r, 1);
      else
        PF_MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    });
  }

  // "allreduce of 4096 x f32", "send of 12 x f32 to rank 1": the watchdog's
  // name of an operation (empty without a watchdog).
  std::string what(const char* op, int64_t count, DType dtype, const char* peer_word = "", int peer = -1) const {
    if (!watchdog_) return "";
    std::string s = std::string(op) + " of " + std::to_string(count) + " x " + dtype_name(dtype) + " (" +
                    std::to_string(count * static_cast<int64_t>(dtype_size(dtype))) + " B)";
    if (peer >= 0) s += peer_word + std::to_string(peer);
    return s;
  }

  // Waits on a stream worker without holding a core: MPI's own waits spin,
  // and the worker shares the rank's cores with its compute stream, whose work
  // the communication is meant to overlap. Polls MPI_Testall, sleeping between
  // polls after a short spin.
  static void wait_politely(MPI_Request* requests, int count) {
    constexpr int kSpinPolls = 64;
    constexpr int kPollSleepUs = 20;
    for (int polls = 0;; ++polls) {
      int done = 0;
      PF_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
      if (done) return;
      if (polls >= kSpinPolls) std::this_thread::sleep_for(std::chrono::microseconds(kPollSleepUs));
    }
  }

  MPI_Request* post() {
    pending_.push_back(MPI_REQUEST_NULL);
    return &pending_.back();
  }

  MPI_Comm comm_;
  HostStreamConfig streams_;
  Stream stream_;
  int rank_ = 0;
  int size_ = 1;
  int depth_ = 0;
  std::vector<MPI_Request> pending_;
  std::vector<std::shared_ptr<const void>> pending_held_;  // what the open group's operations read until done
  Watchdog* watchdog_ = nullptr;
  std::string where_;         // " on rank R of P (mpi)"
  std::string pending_what_;  // the operations of the open group, for the watchdog
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm, const HostStreamConfig& streams, Watchdog* watchdog) {
  PF_REQUIRE(CommError, mpi_usable(),
             "an MPI communicator was requested, but MPI is not initialised (or is finalised)");
  PF_REQUIRE(CommError, comm != MPI_COMM_NULL, "make_mpi_comm given MPI_COMM_NULL");
  int provided = MPI_THREAD_SINGLE;
  PF_MPI_CHECK(MPI_Query_thread(&provided));
  PF_REQUIRE(CommError, !streams.async || provided >= MPI_THREAD_MULTIPLE,
             "CPU streams '" << host_streams_name(streams)
                             << "' run MPI on stream worker threads, which needs MPI_THREAD_MULTIPLE; MPI "
                                "was initialised with a lower level (use CPU streams 'sync')");
  MPI_Comm dup = MPI_COMM_NULL;
  PF_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  return std::make_unique<MpiCommunicator>(dup, streams, watchdog);
}

}  // namespace pf
