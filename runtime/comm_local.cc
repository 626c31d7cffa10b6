// The one-rank communicator: collectives are copies, and sends to self are
// matched with receives from self at the end of their group (in posting
// order), so code written for P ranks runs unchanged at P = 1. A send or
// receive outside a group has no partner and is an error, as it would block
// forever on the other backends.
#include <cstring>
#include <vector>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_impl.h"
#include "runtime/memory.h"

namespace pf {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(Device device) : device_(device) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return device_; }
  Stream stream() const override { return Stream{device_, nullptr}; }
  const char* backend_name() const override { return "local"; }
  bool stream_ordered() const override { return false; }
  ThreadSupport thread_support_needed() const override { return ThreadSupport::Funneled; }

  void send(const void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "send");
    detail::check_count(*this, count, "send");
    PF_REQUIRE(CommError, depth_ > 0,
               "send of " << count << " " << dtype_name(dtype) << " to self outside a group has no matching receive on "
                          << comm_description(*this));
    sends_.push_back(Pending{const_cast<void*>(buf), count, dtype});
  }

  void recv(void* buf, int64_t count, DType dtype, int peer) override {
    detail::check_peer(*this, peer, "recv");
    detail::check_count(*this, count, "recv");
    PF_REQUIRE(CommError, depth_ > 0,
               "receive of " << count << " " << dtype_name(dtype)
                             << " from self outside a group has no matching send on " << comm_description(*this));
    recvs_.push_back(Pending{buf, count, dtype});
  }

  void allgather(const void* send, void* recv, int64_t count_per_rank, DType dtype) override {
    detail::check_count(*this, count_per_rank, "allgather");
    copy(recv, send, count_per_rank * dtype_size(dtype));
  }

  void allreduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp) override {
    detail::check_count(*this, count, "allreduce");
    copy(recv, send, count * dtype_size(dtype));
  }

  void broadcast(void*, int64_t count, DType, int root) override {
    detail::check_peer(*this, root, "broadcast root");
    detail::check_count(*this, count, "broadcast");
  }

  void reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp, int root) override {
    detail::check_peer(*this, root, "reduce root");
    detail::check_count(*this, count, "reduce");
    copy(recv, send, count * dtype_size(dtype));
  }

  void gatherv(const void* send, int64_t send_count, void* recv, const std::vector<int64_t>& recv_counts, DType dtype,
               int root) override {
    detail::check_gatherv(*this, send_count, recv_counts, root);
    copy(recv, send, send_count * dtype_size(dtype));
  }

  void barrier() override { detail::check_not_in_group(*this, depth_, "barrier"); }

  void group_begin() override { ++depth_; }

  void group_end() override {
    detail::check_group_open(*this, depth_);
    if (--depth_ > 0) return;
    std::vector<Pending> sends, recvs;
    sends.swap(sends_);
    recvs.swap(recvs_);
    PF_REQUIRE(CommError, sends.size() == recvs.size(),
               "group posted " << sends.size() << " sends to self but " << recvs.size() << " receives from self on "
                               << comm_description(*this));
    for (size_t i = 0; i < sends.size(); ++i) {
      PF_REQUIRE(CommError, sends[i].count == recvs[i].count && sends[i].dtype == recvs[i].dtype,
                 "send #" << i << " of " << sends[i].count << " " << dtype_name(sends[i].dtype) << " meets receive of "
                          << recvs[i].count << " " << dtype_name(recvs[i].dtype) << " on " << comm_description(*this));
      copy(recvs[i].buf, sends[i].buf, sends[i].count * dtype_size(sends[i].dtype));
    }
  }

  std::unique_ptr<Communicator> split(int color, int) override {
    detail::check_not_in_group(*this, depth_, "split");
    if (color < 0) return nullptr;
    return std::make_unique<LocalCommunicator>(device_);
  }

 private:
  struct Pending {
    void* buf;
    int64_t count;
    DType dtype;
  };

  void copy(void* dst, const void* src, int64_t bytes) const {
    if (dst == src || bytes == 0) return;
    copy_bytes_blocking(dst, device_, src, device_, bytes);  // host-blocking: in place on return
  }

  Device device_;
  int depth_ = 0;
  std::vector<Pending> sends_, recvs_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_comm(Device device) { return std::make_unique<LocalCommunicator>(device); }

}  // namespace pf
