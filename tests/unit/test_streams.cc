// The CPU backend's streams and events, in both modes: work queued on an
// asynchronous stream runs in order on its worker and is visible to the host
// only after synchronize(); events order two streams; releases are stream
// ordered and counted at once; errors come back at synchronize(); a launch
// from a thread that has not bound the device fails; jitter poisons new and
// released memory; the configuration text parses or names the bad text.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"

namespace pf {
namespace {

HostStreamConfig async_streams(bool jitter = false) {
  HostStreamConfig c;
  c.async = true;
  c.jitter = jitter;
  return c;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(HostStreams, ParseAndName) {
  EXPECT_FALSE(parse_host_streams("sync").async);
  EXPECT_TRUE(parse_host_streams("async").async);
  EXPECT_FALSE(parse_host_streams("async").jitter);
  const HostStreamConfig j = parse_host_streams("async+jitter=42");
  EXPECT_TRUE(j.async && j.jitter);
  EXPECT_EQ(j.jitter_seed, 42u);
  EXPECT_EQ(host_streams_name(j), "async+jitter=42");
  EXPECT_EQ(host_streams_name(parse_host_streams("sync")), "sync");
  for (const char* bad : {"", "asynch", "async+jitter=", "async+jitter=x1", "ASYNC"}) {
    try {
      parse_host_streams(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(HostStreams, SyncStreamRunsAtLaunch) {
  Stream s = create_stream(Device::cpu(), HostStreamConfig{});
  EXPECT_FALSE(stream_is_async(s));
  int x = 0;
  host_launch(s, [&x] { x = 1; });
  EXPECT_EQ(x, 1);
  destroy_stream(s);
}

TEST(HostStreams, AsyncStreamRunsInOrderOnItsWorkerAndTheHostSeesItAfterSynchronize) {
  Stream s = create_stream(Device::cpu(), async_streams());
  EXPECT_TRUE(stream_is_async(s));
  std::atomic<bool> release{false};
  std::vector<int> order;
  const std::thread::id host = std::this_thread::get_id();
  std::thread::id worker;
  host_launch(s, [&] {
    while (!release) sleep_ms(1);  // the host returns from every launch while this waits
    worker = std::this_thread::get_id();
  });
  for (int i = 0; i < 100; ++i) host_launch(s, [&order, i] { order.push_back(i); });
  EXPECT_TRUE(order.empty()) << "queued work ran before the stream reached it";
  release = true;
  synchronize(s);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(worker, host);
  destroy_stream(s);
}

TEST(HostStreams, WorkLaunchedFromTheWorkerRunsInlineInOrder) {
  Stream s = create_stream(Device::cpu(), async_streams(true));
  std::vector<int> order;
  host_launch(s, [&] {
    order.push_back(0);
    host_launch(s, [&] { order.push_back(1); });  // as an op that calls another op
    order.push_back(2);
  });
  host_launch(s, [&] { order.push_back(3); });
  synchronize(s);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  destroy_stream(s);
}

TEST(HostStreams, AnEventOrdersTwoStreams) {
  for (int trial = 0; trial < 20; ++trial) {
    Stream producer = create_stream(Device::cpu(), async_streams(true));
    Stream consumer = create_stream(Device::cpu(), async_streams(true));
    int value = 0, seen = -1;
    host_launch(producer, [&value] {
      sleep_ms(2);
      value = 7;
    });
    stream_wait_stream(consumer, producer);
    host_launch(consumer, [&] { seen = value; });
    synchronize(consumer);
    EXPECT_EQ(seen, 7) << "trial " << trial;
    synchronize(producer);
    destroy_stream(consumer);
    destroy_stream(producer);
  }
}

TEST(HostStreams, WaitingOnASyncStreamBlocksTheHost) {
  Stream producer = create_stream(Device::cpu(), async_streams());
  int value = 0;
  host_launch(producer, [&value] {
    sleep_ms(20);
    value = 3;
  });
  const Stream host{};  // synchronous: the host is the stream
  stream_wait_stream(host, producer);
  EXPECT_EQ(value, 3);
  destroy_stream(producer);
}

TEST(HostStreams, EventTimesComeFromWhenTheStreamReachedThem) {
  Stream s = create_stream(Device::cpu(), async_streams());
  const Event a = record_event(s);
  host_launch(s, [] { sleep_ms(30); });
  const Event b = record_event(s);
  const double dt = event_elapsed_seconds(a, b);  // waits for both
  EXPECT_GE(dt, 0.025);
  destroy_stream(s);
}

TEST(HostStreams, AnErrorComesBackAtSynchronizeAndLaterWorkIsSkipped) {
  Stream s = create_stream(Device::cpu(), async_streams());
  bool later_ran = false;
  host_launch(s, [] { throw ValueError("queued op failed: the message of the op"); });
  host_launch(s, [&later_ran] { later_ran = true; });
  const Event e = record_event(s);  // an event still completes, so waiters never hang
  try {
    synchronize(s);
    ADD_FAILURE() << "the error was lost";
  } catch (const ValueError& err) {
    EXPECT_NE(std::string(err.what()).find("the message of the op"), std::string::npos);
  }
  EXPECT_FALSE(later_ran);
  EXPECT_NO_THROW(event_elapsed_seconds(e, e));
  EXPECT_NO_THROW(synchronize(s));  // reported once
  destroy_stream(s);
}

TEST(HostStreams, ALaunchFromAThreadWithoutABoundDeviceFails) {
  Stream s = create_stream(Device::cpu(), async_streams());
  std::string message;
  std::thread unbound([&] {
    try {
      host_launch(s, [] {});
    } catch (const ValueError& e) {
      message = e.what();
    }
  });
  unbound.join();
  EXPECT_NE(message.find("has not bound a device"), std::string::npos) << message;
  std::thread bound([&] {
    DeviceGuard guard(Device::cpu());
    host_launch(s, [] {});
  });
  bound.join();
  synchronize(s);
  destroy_stream(s);
}

// With jitter a release first fills the memory with NaN: a release that ran
// before the queued read would make it read NaN (or freed memory).
TEST(HostStreams, ReleasesAreStreamOrderedAndCountedAtOnce) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker, async_streams(true));
  const ExecContext& ctx = res.ctx();
  std::atomic<bool> release{false};
  float seen = 0;
  {
    Tensor t = Tensor::empty({4}, DType::f32, tracker, "t");
    float* p = t.data<float>();
    p[1] = 3.f;
    host_launch(ctx, [&release] {
      while (!release) sleep_ms(1);
    });
    host_launch(ctx, [p, &seen] { seen = p[1]; });
  }  // released here, in stream order: after the read queued above
  EXPECT_EQ(tracker.stats().current_bytes, 0);
  release = true;
  synchronize(ctx.stream);
  EXPECT_EQ(seen, 3.f);
}

TEST(HostStreams, JitterFillsNewMemoryWithNaN) {
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker, async_streams(true));
  EXPECT_TRUE(stream_poisons_memory(res.ctx().stream));
  Tensor t = Tensor::empty({16}, DType::f32, tracker, "t");
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(t.data<float>()[i])) << i;
  MemoryTracker other(Device::cpu());
  ExecResources plain(Device::cpu(), other, async_streams(false));
  EXPECT_FALSE(stream_poisons_memory(plain.ctx().stream));
}

TEST(HostStreams, CopiesAndClearsAreStreamOperations) {
  Stream s = create_stream(Device::cpu(), async_streams(true));
  std::vector<float> a(64, 1.f), b(64, 2.f);
  std::atomic<bool> release{false};
  host_launch(s, [&release] {
    while (!release) sleep_ms(1);
  });
  copy_bytes(s, b.data(), Device::cpu(), a.data(), Device::cpu(), 64 * 4);
  fill_zero(s, a.data(), Device::cpu(), 32 * 4);
  EXPECT_EQ(b[0], 2.f) << "the copy ran before the stream reached it";
  release = true;
  synchronize(s);
  EXPECT_EQ(b[0], 1.f);     // copied before the clear
  EXPECT_EQ(a[0], 0.f);     // cleared
  EXPECT_EQ(a[40], 1.f);    // beyond the cleared bytes
  destroy_stream(s);
}

}  // namespace
}  // namespace pf
