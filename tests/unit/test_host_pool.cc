// The host pool (runtime/host_pool.h): released large blocks are reused for
// requests of the same pages, the pool never holds more than its bound
// (beyond whole pages), retired blocks wait for their release to reach the
// stream, a release queued on a stream outlives its tracker, and a
// tracker's tensors draw on the pool with its high-water mark as the bound.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "runtime/host_pool.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(HostPool, ReusesAReleasedBlockOfTheSamePages) {
  HostPool pool;
  void* a = pool.take(3 * kMiB, 100 * kMiB);
  std::memset(a, 1, 3 * kMiB);  // writable, whole
  pool.give(a);
  EXPECT_EQ(pool.take(3 * kMiB - 100, 100 * kMiB), a);  // the same pages
  EXPECT_EQ(pool.stats().maps, 1);
  EXPECT_EQ(pool.stats().reuses, 1);
  pool.give(a);
  void* b = pool.take(2 * kMiB, 100 * kMiB);  // fewer pages: a fresh block, never the larger one
  EXPECT_NE(b, a);
  EXPECT_EQ(pool.stats().maps, 2);
  pool.give(b);
}

// Blocks kept from earlier requests are unmapped, those kept longest first,
// when a new block would take the pool over its bound.
TEST(HostPool, HoldsAtMostItsBound) {
  HostPool pool;
  const int64_t bound = 10 * kMiB;
  void* a = pool.take(4 * kMiB, bound);
  void* b = pool.take(3 * kMiB, bound);
  pool.give(a);
  pool.give(b);
  EXPECT_EQ(pool.stats().kept_bytes, 7 * kMiB);
  void* c = pool.take(5 * kMiB, bound);  // 7 + 5 > 10: a (kept first) goes, b stays
  EXPECT_EQ(pool.stats().kept_bytes, 3 * kMiB);
  EXPECT_EQ(pool.stats().in_use_bytes, 5 * kMiB);
  void* d = pool.take(6 * kMiB, bound);  // 3 + 5 + 6 > 10: b goes too, even so over the bound
  EXPECT_EQ(pool.stats().kept_bytes, 0);
  EXPECT_EQ(pool.stats().in_use_bytes, 11 * kMiB);
  pool.give(c);
  pool.give(d);
  EXPECT_THROW(pool.give(c), ValueError);
  EXPECT_THROW(pool.retire(c), ValueError);
  EXPECT_THROW(pool.take(kHostPoolMinBytes - 1, bound), ValueError);
}

// A retired block (its tensor released, its release still queued) is not
// reused and not counted against the bound until it is given back.
TEST(HostPool, RetiredBlocksWaitForTheirGive) {
  HostPool pool;
  void* a = pool.take(4 * kMiB, 4 * kMiB);
  pool.retire(a);
  EXPECT_EQ(pool.stats().retired_bytes, 4 * kMiB);
  EXPECT_EQ(pool.stats().in_use_bytes, 0);
  void* b = pool.take(4 * kMiB, 4 * kMiB);  // a may still be read by queued work
  EXPECT_NE(b, a);
  pool.give(a);
  EXPECT_EQ(pool.stats().retired_bytes, 0);
  EXPECT_EQ(pool.stats().kept_bytes, 4 * kMiB);
  pool.give(b);
  EXPECT_EQ(pool.take(4 * kMiB, 8 * kMiB), a);  // kept longest
}

// Three "steps" of a tracker, each allocating and releasing the same sizes
// in the same order, as a training step does (an activation released and a
// gradient of its size made after it): after the first step every large
// buffer is a kept block, and the pool's mapped bytes never pass the
// tracker's high-water mark (plus whole pages), though reset_peak lowers the
// peak. The small buffer (under kHostPoolMinBytes) is not the pool's.
TEST(HostPool, TrackerTensorsStayUnderTheHighWaterMark) {
  MemoryTracker tracker(Device::cpu());
  const std::shared_ptr<HostPool> pool = tracker.host_pool();
  auto within_bound = [&](int step) {
    const HostPool::Stats s = pool->stats();
    EXPECT_LE(s.in_use_bytes + s.kept_bytes, tracker.high_water_bytes() + 8 * 4096) << "step " << step;
  };
  int64_t maps_after_first = 0;
  for (int step = 0; step < 3; ++step) {
    tracker.reset_peak();
    Tensor x = Tensor::empty({1 << 20}, DType::f32, tracker, "activation");
    Tensor h = Tensor::empty({3 << 19}, DType::f32, tracker, "hidden");
    within_bound(step);
    x = Tensor();
    Tensor dx = Tensor::empty({1 << 20}, DType::f32, tracker, "gradient");
    Tensor small = Tensor::empty({(1 << 16) - 16}, DType::f32, tracker, "small");
    within_bound(step);
    h = Tensor();
    Tensor dh = Tensor::empty({(3 << 19) - 100}, DType::f32, tracker, "gradient");  // the same pages as h
    within_bound(step);
    if (step == 0) maps_after_first = pool->stats().maps;
  }
  EXPECT_EQ(maps_after_first, 2);
  EXPECT_EQ(pool->stats().maps, maps_after_first) << "later steps mapped new blocks";
  EXPECT_EQ(pool->stats().reuses, 2 + 2 * 4);
}

// A tensor released on an asynchronous stream queues its block's release;
// the tracker may be gone before the stream runs it, and the pool stays
// until then.
TEST(HostPool, AReleaseQueuedOnAStreamOutlivesItsTracker) {
  DeviceGuard guard(Device::cpu());
  HostStreamConfig async;
  async.async = true;
  Stream s = create_stream(Device::cpu(), async);
  std::atomic<bool> go{false};
  host_launch(s, [&go] {
    while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::weak_ptr<HostPool> pool;
  {
    MemoryTracker tracker(Device::cpu());
    tracker.set_stream(s);
    pool = tracker.host_pool();
    Tensor t = Tensor::empty({1 << 20}, DType::f32, tracker, "queued");
    t = Tensor();
    EXPECT_EQ(pool.lock()->stats().retired_bytes, 4 * kMiB);
  }
  EXPECT_FALSE(pool.expired()) << "the pool went with its tracker before the stream released its block";
  go = true;
  synchronize(s);
  EXPECT_TRUE(pool.expired());
  destroy_stream(s);
}

TEST(HostPool, CudaTrackersHaveNone) {
  MemoryTracker tracker(Device::cuda(0));
  EXPECT_THROW(tracker.host_pool(), ValueError);
}

}  // namespace
}  // namespace pf
