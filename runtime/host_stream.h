// The CPU backend's asynchronous stream: an in-order queue of operations
// served by one worker thread, the host's model of a CUDA stream (see
// device.h, HostStreamConfig). Private to runtime/: everything else uses the
// Stream and Event functions of device.h.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/device.h"

namespace pf::detail {

// A host event: complete once the operation recorded at its place has run.
struct HostEvent {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  double seconds = 0;  // seconds_now() (runtime/clock.h) when it completed
  void complete();
  void wait();
};

class HostStream {
 public:
  HostStream(Device device, const HostStreamConfig& config);
  // Drains the queue and joins the worker.
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  Device device() const { return device_; }
  const HostStreamConfig& config() const { return config_; }
  // Queues `op`. After an operation failed, later operations are skipped
  // until synchronize() reports the failure, except `always` ones (event
  // records and releases: a waiting stream must not hang, memory must return).
  void launch(std::function<void()> op, bool always = false);
  // Waits until the queue is empty; rethrows the first error of an operation.
  void synchronize();
  bool on_worker() const { return std::this_thread::get_id() == worker_id_; }

 private:
  struct Op {
    std::function<void()> fn;
    bool always;
  };
  void loop();

  Device device_;
  HostStreamConfig config_;
  std::mt19937_64 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  int64_t running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
  std::thread::id worker_id_;
};

}  // namespace pf::detail
