// Streams, events and device binding for both backends: CPU streams here
// (synchronous, or HostStream workers), CUDA streams through stream_cuda.h.
#include <cstdlib>

#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/host_stream.h"
#include "runtime/stream_cuda.h"

namespace pf {
namespace {

// The device each thread bound last (CUDA keeps its own; this one also covers
// the CPU, whose launches are checked against it).
struct ThreadBinding {
  bool bound = false;
  Device device;
};
thread_local ThreadBinding t_binding;

detail::HostStream* host_stream(const Stream& s) { return static_cast<detail::HostStream*>(s.handle); }

std::shared_ptr<detail::HostEvent> host_event(const Event& e) {
  return std::static_pointer_cast<detail::HostEvent>(e.impl());
}

}  // namespace

void set_current_device(Device device) {
  if (device.is_cuda()) detail::cuda_bind_device(device);
  t_binding.bound = true;
  t_binding.device = device;
}

bool bound_device(Device* device) {
  if (t_binding.bound && device) *device = t_binding.device;
  return t_binding.bound;
}

DeviceGuard::DeviceGuard(Device device) : had_(t_binding.bound), previous_(t_binding.device) {
  set_current_device(device);
}

DeviceGuard::~DeviceGuard() {
  if (had_) {
    try {
      set_current_device(previous_);
    } catch (const Error&) {
      // The device was usable a moment ago; nothing sensible to do in a destructor.
    }
  } else {
    t_binding.bound = false;
  }
}

HostStreamConfig parse_host_streams(const std::string& text) {
  HostStreamConfig c;
  if (text == "sync") return c;
  const std::string jitter = "async+jitter";
  if (text == "async") {
    c.async = true;
    return c;
  }
  if (text.compare(0, jitter.size(), jitter) == 0) {
    c.async = c.jitter = true;
    const std::string rest = text.substr(jitter.size());
    if (rest.empty()) return c;
    char* end = nullptr;
    if (rest[0] == '=' && rest.size() > 1) {
      const unsigned long long seed = std::strtoull(rest.c_str() + 1, &end, 10);
      if (end && *end == '\0') {
        c.jitter_seed = seed;
        return c;
      }
    }
  }
  PF_REQUIRE(ConfigError, false,
             "CPU stream mode '" << text << "' (expected sync, async, async+jitter or async+jitter=SEED)");
  return c;
}

std::string host_streams_name(const HostStreamConfig& c) {
  if (!c.async) return "sync";
  if (!c.jitter) return "async";
  return "async+jitter=" + std::to_string(c.jitter_seed);
}

HostStreamConfig host_streams_from_env(const HostStreamConfig& fallback) {
  const char* v = std::getenv("PF_CPU_STREAMS");
  if (!v || !*v) return fallback;
  try {
    return parse_host_streams(v);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("environment variable PF_CPU_STREAMS: ") + e.what());
  }
}

Stream create_stream(Device device, const HostStreamConfig& host) {
  set_current_device(device);
  Stream s{device, nullptr};
  if (device.is_cuda()) s.handle = detail::cuda_stream_create(device);
  else if (host.async) s.handle = new detail::HostStream(device, host);
  return s;
}

void destroy_stream(Stream& stream) {
  if (stream.handle) {
    if (stream.device.is_cuda()) detail::cuda_stream_destroy(stream.handle);
    else delete host_stream(stream);  // drains first
  }
  stream.handle = nullptr;
}

void synchronize(const Stream& stream) {
  if (stream.device.is_cuda()) detail::cuda_stream_synchronize(stream);
  else if (stream.handle && !host_stream(stream)->on_worker()) host_stream(stream)->synchronize();
}

bool stream_is_async(const Stream& stream) { return stream.device.is_cuda() || stream.handle != nullptr; }

bool stream_poisons_memory(const Stream& stream) {
  return stream.device.is_cpu() && stream.handle && host_stream(stream)->config().jitter;
}

namespace {

void launch_on_host(const Stream& stream, std::function<void()> work, bool always) {
  PF_REQUIRE(ValueError, stream.device.is_cpu(), "host work launched on " << stream.device.str() << " stream");
  detail::HostStream* hs = host_stream(stream);
  if (!hs || hs->on_worker()) {
    work();
    return;
  }
  Device bound;
  PF_REQUIRE(ValueError, bound_device(&bound) && bound == stream.device,
             "work launched on a " << stream.device.str() << " stream from a thread that has "
                                   << (bound_device(nullptr) ? "bound " + bound.str() : std::string("not bound a device"))
                                   << " (bind it first: DeviceGuard or set_current_device)");
  hs->launch(std::move(work), always);
}

}  // namespace

void host_launch(const Stream& stream, std::function<void()> work) { launch_on_host(stream, std::move(work), false); }

void host_release(const Stream& stream, std::function<void()> work) { launch_on_host(stream, std::move(work), true); }

Event record_event(const Stream& stream) {
  if (stream.device.is_cuda()) return Event(detail::cuda_event_record(stream), stream.device);
  auto e = std::make_shared<detail::HostEvent>();
  if (detail::HostStream* hs = host_stream(stream); hs && !hs->on_worker()) {
    hs->launch([e] { e->complete(); }, /*always=*/true);
  } else {
    e->complete();
  }
  return Event(e, stream.device);
}

void wait_event(const Stream& stream, const Event& event) {
  if (!event.defined()) return;
  if (event.device().is_cuda()) {
    if (stream.device.is_cuda()) {
      detail::cuda_event_wait(stream, event);
    } else if (detail::HostStream* hs = host_stream(stream); hs && !hs->on_worker()) {
      hs->launch(
          [event] {
            DeviceGuard bind(event.device());  // a worker that never bound a GPU would open a context on GPU 0
            detail::cuda_event_synchronize(event);
          },
          /*always=*/true);
    } else {
      detail::cuda_event_synchronize(event);
    }
    return;
  }
  std::shared_ptr<detail::HostEvent> e = host_event(event);
  if (stream.device.is_cuda()) {
    e->wait();  // a host event ahead of GPU work: the host waits, then launches
    return;
  }
  detail::HostStream* hs = host_stream(stream);
  if (hs && !hs->on_worker()) hs->launch([e] { e->wait(); }, /*always=*/true);
  else e->wait();
}

void stream_wait_stream(const Stream& waiter, const Stream& producer) {
  if (!stream_is_async(producer)) return;  // the host is the producer: already done
  if (waiter.handle == producer.handle && waiter.device == producer.device) return;
  wait_event(waiter, record_event(producer));
}

double event_elapsed_seconds(const Event& start, const Event& end) {
  PF_REQUIRE(ValueError, start.defined() && end.defined() && start.device() == end.device(),
             "event_elapsed_seconds needs two recorded events of one device");
  if (start.device().is_cuda()) return detail::cuda_event_elapsed(start, end);
  auto a = host_event(start), b = host_event(end);
  a->wait();
  b->wait();
  return b->seconds - a->seconds;
}

}  // namespace pf
