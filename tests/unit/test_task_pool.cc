// TaskPool (runtime/task_pool.h): every job runs once and its future gets
// its result, with workers and with none (the caller runs them), jobs start
// in submission order, exceptions reach the future, and a pool destroyed
// with jobs queued discards them without hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "runtime/task_pool.h"

namespace pf {
namespace {

TEST(TaskPool, EveryJobRunsOnceWithAnyNumberOfWorkers) {
  for (int workers : {0, 1, 3}) {
    TaskPool pool(workers);
    EXPECT_EQ(pool.workers(), workers);
    std::atomic<int> runs{0};
    std::vector<std::future<int>> futures;
    for (int i = 0; i < 200; ++i)
      futures.push_back(pool.submit([i, &runs] {
        ++runs;
        return i * i;
      }));
    for (int i = 0; i < 200; ++i) EXPECT_EQ(pool.get_on_caller(futures[static_cast<size_t>(i)]), i * i);
    EXPECT_EQ(runs.load(), 200) << workers << " workers";
    EXPECT_FALSE(pool.help());  // nothing left queued
  }
}

TEST(TaskPool, OneWorkerStartsJobsInSubmissionOrder) {
  TaskPool pool(1);
  std::mutex m;
  std::vector<int> order;
  std::vector<std::future<void>> futures;
  for (int i = 0; i < 100; ++i)
    futures.push_back(pool.submit([i, &m, &order] {
      std::lock_guard<std::mutex> lock(m);
      order.push_back(i);
    }));
  for (auto& f : futures) f.get();  // only the worker runs them
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(TaskPool, CallerRunsQueuedJobsWhenThereAreNoWorkers) {
  TaskPool pool(0);
  bool ran = false;
  std::future<void> f = pool.submit([&ran] { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_TRUE(pool.help());
  EXPECT_TRUE(ran);
  f.get();
}

TEST(TaskPool, ExceptionsReachTheFuture) {
  TaskPool pool(1);
  std::future<int> f = pool.submit([]() -> int { throw std::runtime_error("chunk 3 failed"); });
  try {
    pool.get_on_caller(f);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "chunk 3 failed");
  }
}

TEST(TaskPool, DestroyedWithQueuedJobsDiscardsThem) {
  std::future<int> f;
  {
    TaskPool pool(0);
    f = pool.submit([] { return 1; });
  }
  EXPECT_THROW(f.get(), std::future_error);
}

}  // namespace
}  // namespace pf
