// Memory accounting: current/peak bytes, the cap, and the cap's error message.
#include <gtest/gtest.h>

#include "runtime/tensor.h"

namespace pf {
namespace {

TEST(Memory, TracksCurrentAndPeak) {
  MemoryTracker tracker(Device::cpu());
  {
    Tensor a = Tensor::empty({1024}, DType::f32, tracker, "a");
    Tensor b = Tensor::zeros({16, 16}, DType::f64, tracker, "b");
    EXPECT_EQ(tracker.stats().current_bytes, 4096 + 2048);
    EXPECT_EQ(tracker.stats().allocations, 2);
    EXPECT_EQ(b.data<double>()[255], 0.0);
  }
  EXPECT_EQ(tracker.stats().current_bytes, 0);
  EXPECT_EQ(tracker.stats().peak_bytes, 4096 + 2048);
  tracker.reset_peak();
  EXPECT_EQ(tracker.stats().peak_bytes, 0);
}

TEST(Memory, CapRefusesWithUsefulMessage) {
  MemoryTracker tracker(Device::cpu(), 10000);
  Tensor big = Tensor::empty({2000}, DType::f32, tracker, "activations");
  try {
    Tensor more = Tensor::empty({1000}, DType::f32, tracker, "attention_state");
    FAIL() << "cap not enforced";
  } catch (const MemoryError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("attention_state"), std::string::npos) << w;  // the request
    EXPECT_NE(w.find("3.91 KiB"), std::string::npos) << w;         // its size
    EXPECT_NE(w.find("in use 7.81 KiB"), std::string::npos) << w;  // current use
    EXPECT_NE(w.find("cap 9.77 KiB"), std::string::npos) << w;     // the cap
    EXPECT_NE(w.find("activations="), std::string::npos) << w;     // largest live tags
  }
  // The failed request left the accounting untouched.
  EXPECT_EQ(tracker.stats().current_bytes, 8000);
  EXPECT_EQ(tracker.stats().allocations, 1);
}

TEST(Memory, LiveByTagIsSortedLargestFirst) {
  MemoryTracker tracker(Device::cpu());
  Tensor a = Tensor::empty({10}, DType::u8, tracker, "small");
  Tensor b = Tensor::empty({100}, DType::u8, tracker, "large");
  Tensor c = Tensor::empty({50}, DType::u8, tracker, "large");
  auto tags = tracker.live_by_tag();
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(tags[0].first, "large");
  EXPECT_EQ(tags[0].second, 150);
}

TEST(Tensor, ViewsShareStorageAndCheckTypes) {
  MemoryTracker tracker(Device::cpu());
  Tensor t = Tensor::zeros({4, 3}, DType::f32, tracker, "t");
  Tensor rows = t.slice_rows(1, 3);
  rows.data<float>()[0] = 5.0f;
  EXPECT_EQ(t.data<float>()[3], 5.0f);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_THROW(t.data<double>(), ValueError);
  EXPECT_THROW(t.reshape({5, 3}), ValueError);
  EXPECT_THROW(t.slice_rows(2, 5), ValueError);
  Tensor u = Tensor::empty({12}, DType::f32, tracker, "u");
  u.copy_from(t.reshape({12}));
  EXPECT_EQ(u.data<float>()[3], 5.0f);
  EXPECT_EQ(tracker.stats().current_bytes, 2 * 48);
}

}  // namespace
}  // namespace pf
