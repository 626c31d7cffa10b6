// Worker threads over one job queue: see task_pool.h.
#include "runtime/task_pool.h"

#include <algorithm>
#include <system_error>

#include "runtime/check.h"

namespace pf {

int thread_count(int requested) {
  return requested > 0 ? requested : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

TaskPool::TaskPool(int workers) {
  try {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { run_worker(); });
  } catch (const std::system_error& e) {
    // The workers started so far end and are joined (a joinable thread left
    // behind would end the process); then the caller hears why.
    const size_t started = threads_.size();
    stop_and_join();
    PF_REQUIRE(MemoryError, false,
               "could not start worker thread " << started + 1 << " of " << workers << ": " << e.what());
  }
}

void TaskPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

TaskPool::~TaskPool() { stop_and_join(); }

void TaskPool::push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

bool TaskPool::help() {
  std::function<void()> job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return false;
    job = std::move(queue_.front());
    queue_.pop_front();
  }
  job();
  return true;
}

void TaskPool::run_worker() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace pf
