// Communicators on device buffers: allreduce sum/max/min, allgather,
// broadcast, reduce and gatherv to every root (and the host-value helpers),
// a grouped ring exchange, split, and every scan algorithm in both
// directions, in place and out of place, with the device sum combine and with
// a non-commutative combine (2x2 matrices mod a prime, staged through the
// host). Inputs are keyed by (seed, rank, index) as in the MPI tests.
// Backends, one binary each (PF_TEST_BACKEND selects; a ctest entry whose
// output shows a skip is counted as skipped, so no binary mixes a backend
// that may skip with one that must run):
//   test_comm_staged      (0) the staged communicator on CPU buffers (every
//                         machine; asynchronous jittered streams in .async)
//   test_comm_nccl        (1) NCCL, skipped unless every rank of the node has
//                         its own GPU
//   test_comm_staged_gpu  (2) the staged communicator on a GPU that all the
//                         node's ranks share, skipped without a GPU
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/memory.h"
#include "runtime/scan.h"
#include "runtime/watchdog.h"
#include "tests/comm/comm_test_util.h"

namespace pf {
namespace {

using test::MatrixModCombine;

// This rank's place among the ranks of its node.
struct NodePlace {
  int rank = 0;
  int size = 1;
};

NodePlace node_place() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  NodePlace p;
  MPI_Comm_rank(node, &p.rank);
  MPI_Comm_size(node, &p.size);
  MPI_Comm_free(&node);
  return p;
}

// True on every rank when every node has at least as many GPUs as ranks.
bool enough_gpus() {
  int ok = cuda_device_count() >= node_place().size ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// A device buffer of n elements of T, filled from / read back to the host.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer(MemoryTracker& tracker, int64_t n)
      : tracker_(tracker), n_(n), ptr_(device_allocate(tracker, bytes(), "test buffer")) {}
  ~DeviceBuffer() { device_free(tracker_, ptr_, bytes(), "test buffer"); }
  T* get() const { return static_cast<T*>(ptr_); }
  void upload(const std::vector<T>& host) {
    copy_bytes_blocking(ptr_, tracker_.device(), host.data(), Device::cpu(), bytes());
    synchronize(Stream{tracker_.device(), nullptr});
  }
  std::vector<T> download(const Communicator& comm) const {
    synchronize(comm.stream());
    std::vector<T> host(static_cast<size_t>(n_));
    copy_bytes_blocking(host.data(), Device::cpu(), ptr_, tracker_.device(), bytes());
    return host;
  }

 private:
  int64_t bytes() const { return std::max<int64_t>(1, n_) * static_cast<int64_t>(sizeof(T)); }
  MemoryTracker& tracker_;
  int64_t n_;
  void* ptr_;
};

// Runs a host combine on device memory: drains the stream, copies through
// the host, and waits for the copies (which run on the default stream).
class StagedCombine final : public ScanCombine {
 public:
  StagedCombine(const ScanCombine& host, Device device) : host_(host), device_(device) {}
  DType dtype() const override { return host_.dtype(); }
  Device device() const override { return device_; }
  int64_t granule() const override { return host_.granule(); }
  const char* name() const override { return host_.name(); }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    std::vector<char> h(static_cast<size_t>(count * dtype_size(dtype())));
    host_.fill_identity(h.data(), count, Stream{});
    synchronize(stream);
    copy_bytes_blocking(out, device_, h.data(), Device::cpu(), static_cast<int64_t>(h.size()));
    synchronize(Stream{device_, nullptr});
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    const int64_t bytes = count * dtype_size(dtype());
    std::vector<char> e(static_cast<size_t>(bytes)), l(static_cast<size_t>(bytes));
    synchronize(stream);
    copy_bytes_blocking(e.data(), Device::cpu(), earlier, device_, bytes);
    copy_bytes_blocking(l.data(), Device::cpu(), later, device_, bytes);
    host_.combine(e.data(), l.data(), e.data(), count, Stream{});
    copy_bytes_blocking(out, device_, e.data(), Device::cpu(), bytes);
    synchronize(Stream{device_, nullptr});
  }

 private:
  const ScanCombine& host_;
  Device device_;
};

enum class Backend { Nccl, StagedGpu, StagedCpu };

const char* backend_label(Backend b) {
  switch (b) {
    case Backend::Nccl: return "Nccl";
    case Backend::StagedGpu: return "StagedGpu";
    case Backend::StagedCpu: return "StagedCpu";
  }
  return "?";
}

// The staged communicator's MPI runs on a host stream: asynchronous unless
// PF_CPU_STREAMS says otherwise (the .async entries add jitter).
HostStreamConfig staged_streams() {
  HostStreamConfig async;
  async.async = true;
  return host_streams_from_env(async);
}

class DeviceCommTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Backend::Nccl:
        if (!enough_gpus()) GTEST_SKIP() << "NCCL needs one GPU per rank: " << cuda_unavailable_reason();
        comm_ = make_nccl_comm(MPI_COMM_WORLD);
        break;
      case Backend::StagedGpu:
        if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
        comm_ = make_staged_comm(MPI_COMM_WORLD, Device::cuda(node_place().rank % cuda_device_count()),
                                 staged_streams());
        break;
      case Backend::StagedCpu:
        comm_ = make_staged_comm(MPI_COMM_WORLD, Device::cpu(), host_streams_from_env());
        break;
    }
    set_current_device(comm_->device());
    tracker_ = std::make_unique<MemoryTracker>(comm_->device());
  }
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<MemoryTracker> tracker_;
};

template <typename T>
std::vector<T> keyed(int64_t n, uint64_t seed, int rank) {
  std::vector<T> v(static_cast<size_t>(n));
  test::fill_sum_input(v.data(), n, seed, rank);
  return v;
}

TEST_P(DeviceCommTest, AllreduceAllgatherBroadcast) {
  const int rank = comm_->rank(), ranks = comm_->size();
  const int64_t n = 4099;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<float> want = keyed<float>(n, 1, 0);
    for (int r = 1; r < ranks; ++r) {
      const auto other = keyed<float>(n, 1, r);
      for (int64_t i = 0; i < n; ++i)
        want[i] = op == ReduceOp::Sum   ? want[i] + other[i]
                  : op == ReduceOp::Max ? std::max(want[i], other[i])
                                        : std::min(want[i], other[i]);
    }
    DeviceBuffer<float> in(*tracker_, n), out(*tracker_, n);
    in.upload(keyed<float>(n, 1, rank));
    comm_->allreduce(in.get(), out.get(), n, DType::f32, op);
    EXPECT_EQ(out.download(*comm_), want) << reduce_op_name(op);
    comm_->allreduce(in.get(), in.get(), n, DType::f32, op);
    EXPECT_EQ(in.download(*comm_), want) << "in place " << reduce_op_name(op);
  }
  std::vector<int64_t> gathered_want;
  for (int r = 0; r < ranks; ++r) {
    const auto b = keyed<int64_t>(n, 2, r);
    gathered_want.insert(gathered_want.end(), b.begin(), b.end());
  }
  DeviceBuffer<int64_t> mine(*tracker_, n), all(*tracker_, n * ranks);
  mine.upload(keyed<int64_t>(n, 2, rank));
  comm_->allgather(mine.get(), all.get(), n, DType::i64);
  EXPECT_EQ(all.download(*comm_), gathered_want);
  for (int root = 0; root < ranks; ++root) {
    DeviceBuffer<double> buf(*tracker_, n);
    buf.upload(keyed<double>(n, 3, rank));
    comm_->broadcast(buf.get(), n, DType::f64, root);
    EXPECT_EQ(buf.download(*comm_), keyed<double>(n, 3, root)) << "root " << root;
  }
}

// reduce and gatherv to every root on device buffers (variable counts, zero
// for some ranks; the root's block in place and out of place), and the host
// helpers that stage host values through the device.
TEST_P(DeviceCommTest, ReduceAndGathervToEveryRoot) {
  const int rank = comm_->rank(), ranks = comm_->size();
  const int64_t n = 1031;
  std::vector<double> want_sum = keyed<double>(n, 40, 0);
  for (int r = 1; r < ranks; ++r) {
    const auto other = keyed<double>(n, 40, r);
    for (int64_t i = 0; i < n; ++i) want_sum[i] += other[i];
  }
  std::vector<int64_t> counts;
  for (int r = 0; r < ranks; ++r) counts.push_back((r * 3 + 1) % 4 * 250);
  std::vector<float> want_all;
  for (int r = 0; r < ranks; ++r) {
    const auto b = keyed<float>(counts[r], 41, r);
    want_all.insert(want_all.end(), b.begin(), b.end());
  }
  const int64_t total = static_cast<int64_t>(want_all.size());
  const auto mine = keyed<float>(counts[rank], 41, rank);
  for (int root = 0; root < ranks; ++root) {
    DeviceBuffer<double> in(*tracker_, n), out(*tracker_, n);
    in.upload(keyed<double>(n, 40, rank));
    out.upload(std::vector<double>(static_cast<size_t>(n), -1.0));
    comm_->reduce(in.get(), out.get(), n, DType::f64, ReduceOp::Sum, root);
    const auto got = out.download(*comm_);
    if (rank == root) {
      EXPECT_EQ(got, want_sum) << "reduce to root " << root;
    }
    comm_->reduce(in.get(), in.get(), n, DType::f64, ReduceOp::Sum, root);
    if (rank == root) {
      EXPECT_EQ(in.download(*comm_), want_sum) << "reduce in place to root " << root;
    }

    // (DeviceBuffer holds at least one element: a rank that sends nothing
    // uploads one unused element)
    DeviceBuffer<float> send(*tracker_, std::max<int64_t>(1, counts[rank])), all(*tracker_, total);
    std::vector<float> padded = mine;
    padded.resize(std::max<size_t>(1, mine.size()), 0.f);
    send.upload(padded);
    comm_->gatherv(send.get(), counts[rank], rank == root ? all.get() : nullptr, counts, DType::f32, root);
    const auto gathered = all.download(*comm_);  // the root's; the others' buffer is not written
    if (rank == root) {
      EXPECT_EQ(gathered, want_all) << "gatherv to root " << root;
    }
    int64_t before = 0;
    for (int r = 0; r < root; ++r) before += counts[r];
    if (rank == root) {
      std::vector<float> seeded(static_cast<size_t>(total), -1.f);
      std::copy(mine.begin(), mine.end(), seeded.begin() + before);
      all.upload(seeded);
    }
    comm_->gatherv(rank == root ? all.get() + before : send.get(), counts[rank], rank == root ? all.get() : nullptr,
                   counts, DType::f32, root);
    const auto inplace = all.download(*comm_);
    if (rank == root) {
      EXPECT_EQ(inplace, want_all) << "gatherv in place to root " << root;
    }

    std::vector<double> host = keyed<double>(n, 40, rank);
    reduce_host_values(*comm_, host.data(), n, DType::f64, ReduceOp::Sum, root, *tracker_);
    EXPECT_EQ(host, rank == root ? want_sum : keyed<double>(n, 40, rank)) << "reduce_host_values to root " << root;
    std::vector<float> host_all(rank == root ? static_cast<size_t>(total) : 0, -1.f);
    gatherv_host_values(*comm_, mine.data(), counts[rank], host_all.data(), counts, DType::f32, root, *tracker_);
    if (rank == root) {
      EXPECT_EQ(host_all, want_all) << "gatherv_host_values to root " << root;
    }
  }
}

TEST_P(DeviceCommTest, GroupedRingExchangeAndSplit) {
  const int rank = comm_->rank(), ranks = comm_->size();
  const int64_t n = 1 << 18;
  DeviceBuffer<double> mine(*tracker_, n), got(*tracker_, n);
  mine.upload(keyed<double>(n, 4, rank));
  comm_->group_begin();
  comm_->send(mine.get(), n, DType::f64, (rank + 1) % ranks);
  comm_->recv(got.get(), n, DType::f64, (rank + ranks - 1) % ranks);
  comm_->group_end();
  EXPECT_EQ(got.download(*comm_), keyed<double>(n, 4, (rank + ranks - 1) % ranks));

  auto sub = comm_->split(rank % 2, rank);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), (ranks + 1 - rank % 2) / 2);
  EXPECT_EQ(sub->rank(), rank / 2);
  DeviceBuffer<int32_t> one(*tracker_, 1);
  one.upload({1});
  sub->allreduce(one.get(), one.get(), 1, DType::i32, ReduceOp::Sum);
  EXPECT_EQ(one.download(*sub)[0], sub->size());
  comm_->barrier();
}

template <typename T, typename Fill>
void check_device_scans(Communicator& comm, MemoryTracker& tracker, const ScanCombine& combine,
                        const ScanCombine& host_combine, Fill fill, const std::vector<int64_t>& counts, uint64_t seed) {
  ScanWorkspace workspace(tracker);  // drained by each download before it is reused or freed
  for (int64_t count : counts) {
    std::vector<T> input(static_cast<size_t>(count));
    fill(input.data(), count, seed, comm.rank());
    for (ScanDirection direction : {ScanDirection::Forward, ScanDirection::Reverse}) {
      const auto want = test::expected_scan<T>(host_combine, fill, count, seed, comm.rank(), comm.size(), direction);
      for (ScanAlgorithm algorithm :
           {ScanAlgorithm::Auto, ScanAlgorithm::Chain, ScanAlgorithm::Allgather, ScanAlgorithm::RecursiveDoubling}) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool in_place = variant & 1, reuse = variant & 2;
          ScanOptions options;
          options.direction = direction;
          options.algorithm = algorithm;
          options.chain_segment_bytes = 4096;
          options.tracker = &tracker;
          if (reuse) options.workspace = &workspace;
          DeviceBuffer<T> in(tracker, count), out(tracker, count);
          in.upload(input);
          exclusive_scan(comm, in.get(), in_place ? in.get() : out.get(), count, combine, options);
          EXPECT_EQ((in_place ? in : out).download(comm), want)
              << combine.name() << " " << scan_algorithm_name(algorithm) << " " << scan_direction_name(direction)
              << (in_place ? " in place" : "") << (reuse ? " with a workspace" : "") << " count " << count;
        }
      }
    }
  }
}

TEST_P(DeviceCommTest, SumScansOnTheDevice) {
  auto sum = make_sum_combine(DType::f32, comm_->device());
  auto host_sum = make_sum_combine(DType::f32);
  check_device_scans<float>(*comm_, *tracker_, *sum, *host_sum, test::fill_sum_input<float>, {1, 1000, 5000}, 5);
  auto sum64 = make_sum_combine(DType::i64, comm_->device());
  auto host_sum64 = make_sum_combine(DType::i64);
  check_device_scans<int64_t>(*comm_, *tracker_, *sum64, *host_sum64, test::fill_sum_input<int64_t>, {3, 2049}, 6);
}

// The segmented form of the device sum (random flags: its select kernels on
// the device) against the segmented host sum.
TEST_P(DeviceCommTest, SegmentedScansOnTheDevice) {
  auto sum = make_sum_combine(DType::f32, comm_->device());
  auto host_sum = make_sum_combine(DType::f32);
  ScanWorkspace scratch(*tracker_);
  MemoryTracker host_tracker(Device::cpu());
  ScanWorkspace host_scratch(host_tracker);
  auto segmented = make_segmented_combine(*sum, scratch);
  auto host_segmented = make_segmented_combine(*host_sum, host_scratch);
  for (test::Flags flags : {test::Flags::Random, test::Flags::LastRank})
    check_device_scans<float>(*comm_, *tracker_, *segmented, *host_segmented,
                              test::segmented_fill<float>(test::fill_sum_input<float>, 1, flags, comm_->size()),
                              {2, 2000}, 8);
}

TEST_P(DeviceCommTest, NonCommutativeScansOnTheDevice) {
  MatrixModCombine host;
  StagedCombine staged(host, comm_->device());
  check_device_scans<int64_t>(*comm_, *tracker_, staged, host, MatrixModCombine::fill_input, {4, 2052}, 7);
}

#if PF_TEST_BACKEND == 1
// The watchdog's thread polls an NCCL operation's event on the
// communicator's device, bound on that thread first (recorded by the
// communicator), and the operation then counts as completed.
TEST(NcclWatchdog, PollsEventsOnTheCommunicatorsDevice) {
  if (!enough_gpus()) GTEST_SKIP() << "NCCL needs one GPU per rank: " << cuda_unavailable_reason();
  std::atomic<int> fired{0};
  Watchdog watchdog(5.0, 0, [&fired](int code) { fired = code; });
  auto comm = make_nccl_comm(MPI_COMM_WORLD, &watchdog);
  EXPECT_EQ(nccl_watch_device(*comm), -1) << "no event polled yet";
  MemoryTracker tracker(comm->device());
  DeviceBuffer<float> buf(tracker, 1024);
  const uint64_t before = watchdog.completed();
  comm->allreduce(buf.get(), buf.get(), 1024, DType::f32, ReduceOp::Sum);
  synchronize(comm->stream());
  // The thread polls every timeout / 8 (0.625 s).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (watchdog.completed() == before && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(watchdog.completed(), before) << "the allreduce's event was never seen done";
  EXPECT_EQ(nccl_watch_device(*comm), comm->device().index);
  EXPECT_EQ(fired, 0);
}
#endif

#ifndef PF_TEST_BACKEND
#error "PF_TEST_BACKEND selects the backend: 0 staged on the CPU, 1 NCCL, 2 staged on a GPU"
#endif
constexpr Backend kBackends[] = {Backend::StagedCpu, Backend::Nccl, Backend::StagedGpu};
INSTANTIATE_TEST_SUITE_P(Device, DeviceCommTest, ::testing::Values(kBackends[PF_TEST_BACKEND]),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

}  // namespace
}  // namespace pf
