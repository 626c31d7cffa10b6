// The execution context every dispatching kernel takes: where to run (device),
// on which stream, with which BLAS handle, and where temporary memory is
// accounted. Owned by the caller (the model or a tool); no global state.
#pragma once

#include "runtime/device.h"
#include "runtime/memory.h"

namespace pf {

struct ExecContext {
  Device device = Device::cpu();
  Stream stream;
  void* blas = nullptr;             // cublasHandle_t on CUDA, unused on the CPU
  MemoryTracker* tracker = nullptr;  // temporaries are recorded here

  // The same context with its work on another stream (a communicator's). The
  // BLAS handle stays bound to the owner's stream: only for kernels without BLAS.
  ExecContext on(const Stream& other) const {
    ExecContext c = *this;
    c.stream = other;
    return c;
  }
};

// Runs host work on ctx.stream (see host_launch): the CPU half of every op.
// Checks that the stream belongs to the context's device.
void host_launch(const ExecContext& ctx, std::function<void()> work);

// Owns an ExecContext: creates the stream (asynchronous on CUDA; on the CPU as
// `host_streams` says) and the BLAS handle, makes the stream the tracker's
// (tensors are released on it), and releases them on destruction. The
// creating thread binds the device.
class ExecResources {
 public:
  ExecResources(Device device, MemoryTracker& tracker,
                const HostStreamConfig& host_streams = host_streams_from_env());
  ~ExecResources();
  ExecResources(const ExecResources&) = delete;
  ExecResources& operator=(const ExecResources&) = delete;
  const ExecContext& ctx() const { return ctx_; }

 private:
  ExecContext ctx_;
};

}  // namespace pf
