#include "runtime/host_stream.h"

#include <chrono>

#include "runtime/clock.h"

namespace pf::detail {

void HostEvent::complete() {
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    seconds = seconds_now();
  }
  cv.notify_all();
}

void HostEvent::wait() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [this] { return done; });
}

HostStream::HostStream(Device device, const HostStreamConfig& config)
    : device_(device), config_(config), rng_(config.jitter_seed ^ reinterpret_cast<uintptr_t>(this)) {
  worker_ = std::thread([this] { loop(); });
  worker_id_ = worker_.get_id();
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void HostStream::launch(std::function<void()> op, bool always) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Op{std::move(op), always});
  }
  cv_.notify_all();
}

void HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void HostStream::loop() {
  set_current_device(device_);  // the worker launches on its own device
  std::uniform_int_distribution<int> jitter_us(0, config_.jitter_max_us);
  for (;;) {
    Op op;
    bool skip = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped and drained
      op = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      skip = error_ && !op.always;
    }
    std::exception_ptr failed;
    if (!skip) {
      if (config_.jitter) std::this_thread::sleep_for(std::chrono::microseconds(jitter_us(rng_)));
      try {
        op.fn();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed && !error_) error_ = failed;
      --running_;
    }
    cv_.notify_all();
  }
}

}  // namespace pf::detail
