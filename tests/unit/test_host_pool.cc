// The host pool (runtime/host_pool.h): released large blocks are reused for
// requests of their size, the pool never holds more than its bound (beyond
// whole pages), and a tracker's tensors draw on it with the tracker's
// high-water mark as the bound, across training-like steps.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/host_pool.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(HostPool, ReusesAReleasedBlockOfTheSameSize) {
  HostPool pool;
  void* a = pool.take(3 * kMiB, 100 * kMiB);
  std::memset(a, 1, 3 * kMiB);  // writable, whole
  pool.give(a);
  EXPECT_EQ(pool.take(3 * kMiB, 100 * kMiB), a);
  EXPECT_EQ(pool.stats().maps, 1);
  EXPECT_EQ(pool.stats().reuses, 1);
  pool.give(a);
}

TEST(HostPool, TakesTheSmallestKeptBlockWithinAnEighth) {
  HostPool pool;
  void* big = pool.take(9 * kMiB + kMiB / 2, 100 * kMiB);  // more than an eighth over 8 MiB
  void* fit = pool.take(8 * kMiB + kMiB / 2, 100 * kMiB);  // within it
  void* exact = pool.take(8 * kMiB, 100 * kMiB);
  pool.give(big);
  pool.give(fit);
  pool.give(exact);
  EXPECT_EQ(pool.take(8 * kMiB, 100 * kMiB), exact);
  EXPECT_EQ(pool.take(8 * kMiB, 100 * kMiB), fit);
  void* fresh = pool.take(8 * kMiB, 100 * kMiB);  // `big` would waste more than an eighth
  EXPECT_NE(fresh, big);
  EXPECT_EQ(pool.stats().maps, 4);
  EXPECT_EQ(pool.stats().reuses, 2);
  pool.give(exact);
  pool.give(fit);
  pool.give(fresh);
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
  EXPECT_THROW(pool.take(kHostPoolMinBytes - 1, bound), ValueError);
}

// Three "steps" of a tracker, each allocating and releasing the same sizes
// in the same order, as a training step does (an activation released and a
// gradient of its size made after it): after the first step every buffer is
// a kept block, and the pool's mapped bytes never pass the tracker's
// high-water mark (plus whole pages), though reset_peak lowers the peak.
TEST(HostPool, TrackerTensorsStayUnderTheHighWaterMark) {
  MemoryTracker tracker(Device::cpu());
  auto within_bound = [&](int step) {
    const HostPool::Stats s = tracker.host_pool().stats();
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
    Tensor small = Tensor::empty({1 << 16}, DType::f32, tracker, "small");
    within_bound(step);
    h = Tensor();
    Tensor dh = Tensor::empty({(3 << 19) - 1000}, DType::f32, tracker, "gradient");  // within an eighth
    within_bound(step);
    if (step == 0) maps_after_first = tracker.host_pool().stats().maps;
  }
  EXPECT_EQ(maps_after_first, 3);
  EXPECT_EQ(tracker.host_pool().stats().maps, maps_after_first) << "later steps mapped new blocks";
  EXPECT_EQ(tracker.host_pool().stats().reuses, 2 + 2 * 5);
}

TEST(HostPool, CudaTrackersHaveNone) {
  MemoryTracker tracker(Device::cuda(0));
  EXPECT_THROW(tracker.host_pool(), ValueError);
}

}  // namespace
}  // namespace pf
