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
};

// Owns an ExecContext: creates the stream and BLAS handle for CUDA devices and
// releases them on destruction.
class ExecResources {
 public:
  ExecResources(Device device, MemoryTracker& tracker);
  ~ExecResources();
  ExecResources(const ExecResources&) = delete;
  ExecResources& operator=(const ExecResources&) = delete;
  const ExecContext& ctx() const { return ctx_; }

 private:
  ExecContext ctx_;
};

}  // namespace pf
