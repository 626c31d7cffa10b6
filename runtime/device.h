// Devices and streams. The CPU always exists; CUDA devices exist when the build
// has the CUDA backend and a driver and GPU are present. Asking for CUDA devices
// on a machine without them gives 0, never an error or a message.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace pf {

enum class DeviceKind { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int i) { return {DeviceKind::CUDA, i}; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu" or "cuda:N"
};

// True when this build contains the CUDA backend (nvcc was found at build time).
bool cuda_compiled();
// Number of usable CUDA devices: 0 without the backend, a driver, or a GPU.
int cuda_device_count();
// Why cuda_device_count() is 0, for one-line user messages ("" when GPUs exist).
std::string cuda_unavailable_reason();
// Compute capability as major * 10 + minor (70 for V100, 90 for H100); 0 for
// the CPU.
int compute_capability(Device device);
// Makes `device` current for this thread (cudaSetDevice for CUDA devices).
// Every thread that launches work binds its device first; on asynchronous
// host streams a launch from a thread that has not bound the stream's device
// fails (so the CPU tests catch the unbound-thread bug class of the GPU path).
void set_current_device(Device device);
// The device this thread bound last; false when it never bound one.
bool bound_device(Device* device);

// Binds `device` for this thread for the guard's lifetime, then restores what
// the thread had bound before.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  bool had_ = false;
  Device previous_;
};

// How CPU streams run (device.cpu_streams; the environment variable
// PF_CPU_STREAMS overrides it, for tests):
//   sync    work runs on the launching thread at launch; events are complete
//           when recorded (the fast, simple mode).
//   async   each stream is an in-order queue served by its own worker thread,
//           as a CUDA stream is served by the GPU: launches, copies, clears and
//           releases return at once; a result crosses streams only through an
//           event; the host sees results only after synchronize().
//   +jitter a seeded random delay of up to jitter_max_us before each queued
//           operation, so a missing event shows up as a wrong result.
// Text form: "sync", "async", "async+jitter", "async+jitter=SEED".
struct HostStreamConfig {
  bool async = false;
  bool jitter = false;
  uint64_t jitter_seed = 1;
  int jitter_max_us = 300;
};
HostStreamConfig parse_host_streams(const std::string& text);  // throws ConfigError naming the text
std::string host_streams_name(const HostStreamConfig& config);
// PF_CPU_STREAMS when it is set, else `fallback`.
HostStreamConfig host_streams_from_env(const HostStreamConfig& fallback = {});

// A stream of work on a device: a cudaStream_t on CUDA; on the CPU a
// HostStream (asynchronous mode) or nullptr (synchronous mode: work runs at
// launch on the calling thread). Work is ordered only by streams and events.
struct Stream {
  Device device = Device::cpu();
  void* handle = nullptr;
};

// Creates a stream (non-blocking on CUDA) and binds its device for the calling
// thread. CPU streams follow `host`.
Stream create_stream(Device device, const HostStreamConfig& host = host_streams_from_env());
// Drains the stream's work, then releases it.
void destroy_stream(Stream& stream);
// Waits until every operation queued on `stream` has run; rethrows the first
// error one of them raised (with its context).
void synchronize(const Stream& stream);
// True when work on `stream` may still be running after the launch returns
// (CUDA streams, asynchronous host streams).
bool stream_is_async(const Stream& stream);
// True for an asynchronous host stream with jitter: memory allocated or
// released in its order is filled with NaN bytes, so that a read before the
// write or after the release shows.
bool stream_poisons_memory(const Stream& stream);

// Runs `work` on a CPU stream in stream order: queued on an asynchronous
// stream; run at once on a synchronous one, and when called from the stream's
// own worker (work that launches more work runs inline, in order).
void host_launch(const Stream& stream, std::function<void()> work);
// As host_launch, for a release: queued to run even after an earlier
// operation on the stream failed (memory must return).
void host_release(const Stream& stream, std::function<void()> work);

// A point in a stream's work. record_event() marks everything queued so far;
// wait_event() makes later work on another stream wait for it. On a
// synchronous CPU stream the host itself is the stream: recording gives a
// completed event, and waiting blocks the calling thread.
class Event {
 public:
  Event() = default;
  bool defined() const { return impl_ != nullptr; }
  const std::shared_ptr<void>& impl() const { return impl_; }
  Device device() const { return device_; }
  Event(std::shared_ptr<void> impl, Device device) : impl_(std::move(impl)), device_(device) {}

 private:
  std::shared_ptr<void> impl_;
  Device device_ = Device::cpu();
};

Event record_event(const Stream& stream);
void wait_event(const Stream& stream, const Event& event);
// Later work on `waiter` waits for everything queued on `producer` so far.
void stream_wait_stream(const Stream& waiter, const Stream& producer);
// Seconds between two completed events of one device (the host clock on CPU
// streams, cudaEventElapsedTime on CUDA).
double event_elapsed_seconds(const Event& start, const Event& end);

}  // namespace pf
