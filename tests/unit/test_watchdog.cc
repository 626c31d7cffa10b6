// The watchdog (runtime/watchdog.h) on its own: it fires for an operation
// without progress, with a report naming the operation, the phase and the
// operations completed before; never for operations that complete or make
// progress, nor when disabled; a device operation counts until its `done`.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "runtime/watchdog.h"

namespace pf {
namespace {

using namespace std::chrono_literals;

struct Fired {
  std::atomic<int> code{0};
  std::atomic<int> hooks{0};
  std::string report;
  std::mutex mu;
};

std::unique_ptr<Watchdog> make(double timeout_s, Fired& f) {
  return std::make_unique<Watchdog>(
      timeout_s, 3, [&f](int code) { f.code = code; },
      [&f](const std::string& r) {
        std::lock_guard<std::mutex> lock(f.mu);
        f.report = r;
      });
}

// Waits up to `limit` for the watchdog to fire.
bool fired_within(const Fired& f, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f.code != 0) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f.code != 0;
}

TEST(Watchdog, FiresForAStalledOperationWithAReport) {
  Fired f;
  auto w = make(0.2, f);
  w->add_abort_hook([&f] { ++f.hooks; });
  w->set_phase("step 7");
  { Watchdog::Op done(w.get(), "allreduce of 4 x f32"); }
  w->set_phase("step 8");
  Watchdog::Op stuck(w.get(), "recv of 12 x f32 from rank 1");
  ASSERT_TRUE(fired_within(f, 5000ms));
  EXPECT_EQ(f.code, kWatchdogExitCode);
  EXPECT_EQ(f.hooks, 1);
  std::lock_guard<std::mutex> lock(f.mu);
  EXPECT_NE(f.report.find("watchdog on rank 3: no progress for"), std::string::npos) << f.report;
  EXPECT_NE(f.report.find("in recv of 12 x f32 from rank 1, during step 8"), std::string::npos) << f.report;
  EXPECT_NE(f.report.find("allreduce of 4 x f32, during step 7"), std::string::npos) << f.report;
  EXPECT_NE(f.report.find("exit status 75"), std::string::npos) << f.report;
}

// The advice that ends the report: the trainer's (resume from the last
// checkpoint) by default, a tool's own after set_ending_advice (the
// inference tools write no checkpoint).
TEST(Watchdog, TheReportEndsWithTheOwnersAdvice) {
  for (const bool tool : {false, true}) {
    Fired f;
    auto w = make(0.2, f);
    if (tool) w->set_ending_advice("no output file of this command was written; run it again");
    Watchdog::Op stuck(w.get(), "bcast of 1 x i64");
    ASSERT_TRUE(fired_within(f, 5000ms));
    std::lock_guard<std::mutex> lock(f.mu);
    EXPECT_EQ(f.report.find("--resume auto") != std::string::npos, !tool) << f.report;
    EXPECT_EQ(f.report.find("no output file of this command was written; run it again") != std::string::npos, tool)
        << f.report;
  }
}

// An owner removing its hook learns whether it ran: true before the watchdog
// fires (the owner still destroys its resource), false after (the resource
// was aborted: ncclCommDestroy after ncclCommAbort would free it twice); a
// removal during a running hook waits for it.
TEST(Watchdog, RemovingAHookSaysWhetherItRan) {
  Fired f;
  auto w = make(0.2, f);
  const int early = w->add_abort_hook([&f] { ++f.hooks; });
  EXPECT_TRUE(w->remove_abort_hook(early));
  std::atomic<bool> in_hook{false};
  const int slow = w->add_abort_hook([&f, &in_hook] {
    in_hook = true;
    std::this_thread::sleep_for(300ms);
    ++f.hooks;
  });
  Watchdog::Op stuck(w.get(), "recv of 1 x f32 from rank 0");
  while (!in_hook) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(w->remove_abort_hook(slow));
  EXPECT_EQ(f.hooks, 1) << "the removal returned before the running hook ended";
  ASSERT_TRUE(fired_within(f, 5000ms));
}

TEST(Watchdog, ProgressAndCompletedOperationsNeverFire) {
  Fired f;
  auto w = make(0.3, f);
  // 1.2 s of work, four timeouts, in operations that complete or progress,
  // with gaps between them (compute) longer than the timeout.
  {
    Watchdog::Op op(w.get(), "scan segments");
    for (int i = 0; i < 8; ++i) {
      std::this_thread::sleep_for(100ms);
      op.progress();
    }
  }
  std::this_thread::sleep_for(600ms);
  for (int i = 0; i < 4; ++i) {
    Watchdog::Op op(w.get(), "allreduce");
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(f.code, 0);
  EXPECT_EQ(w->report_now(), "");
}

TEST(Watchdog, DisabledNeverFires) {
  Fired f;
  auto w = make(0, f);
  EXPECT_FALSE(w->enabled());
  Watchdog::Op stuck(w.get(), "barrier");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(f.code, 0);
  EXPECT_NE(w->report_now().find("barrier"), std::string::npos);
}

TEST(Watchdog, NullWatchdogOpsAreNoOps) {
  Watchdog::Op op(nullptr, "anything");
  op.progress();
}

TEST(Watchdog, DeviceOperationCountsUntilDone) {
  Fired f;
  auto w = make(0.3, f);
  std::atomic<bool> done{false};
  w->watch_async("allreduce of 8 x f32 (nccl)", [&done] { return done.load(); });
  std::this_thread::sleep_for(100ms);
  done = true;  // completes before the timeout: never fires
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(f.code, 0);
  w->watch_async("send of 8 x f32 to rank 2 (nccl)", [] { return false; });
  ASSERT_TRUE(fired_within(f, 5000ms));
  std::lock_guard<std::mutex> lock(f.mu);
  EXPECT_NE(f.report.find("in send of 8 x f32 to rank 2 (nccl)"), std::string::npos) << f.report;
  EXPECT_NE(f.report.find("allreduce of 8 x f32 (nccl)"), std::string::npos) << f.report;
}

}  // namespace
}  // namespace pf
