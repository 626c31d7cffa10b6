// A few worker threads that start submitted jobs in submission order, and let
// the submitting thread run queued jobs itself while it waits (help()), so a
// pool of one worker on two cores keeps both busy.
//   TaskPool pool(1);
//   std::future<T> f = pool.submit([=] { return work(); });
//   while (!ready(f)) if (!pool.help()) f.wait();
// With 0 workers nothing runs until help() or get_on_caller() runs it on the
// calling thread. The destructor runs nothing more: it discards queued jobs
// (their futures report broken_promise) and joins the workers. A worker that
// cannot start (the system's thread limit) is a MemoryError naming how many
// started, with the ones that did joined first.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace pf {

// `requested` threads, or the machine's hardware threads (at least 1) when 0.
int thread_count(int requested);
// The most threads a tool's --threads accepts: far above any core count, far
// below what a process may start.
constexpr int kMaxThreads = 1024;

class TaskPool {
 public:
  explicit TaskPool(int workers);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  template <typename F>
  auto submit(F&& fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> f = task->get_future();
    push([task] { (*task)(); });
    return f;
  }

  // Runs the oldest queued job on the calling thread; false when none is queued.
  bool help();
  // Waits for f, running queued jobs on the calling thread meanwhile; then f.get().
  template <typename R>
  R get_on_caller(std::future<R>& f) {
    while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      if (!help()) f.wait();
    return f.get();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

 private:
  void push(std::function<void()> job);
  void run_worker();
  void stop_and_join();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace pf
