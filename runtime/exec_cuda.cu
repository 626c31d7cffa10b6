#include "runtime/cuda_check.cuh"
#include "runtime/exec.h"

namespace pf {

ExecResources::ExecResources(Device device, MemoryTracker& tracker) {
  PF_REQUIRE(ValueError, tracker.device() == device,
             "tracker for " << tracker.device().str() << " given for device " << device.str());
  ctx_.device = device;
  ctx_.tracker = &tracker;
  ctx_.stream = create_stream(device);
  if (device.is_cuda()) {
    cublasHandle_t h = nullptr;
    PF_CUBLAS_CHECK(cublasCreate(&h));
    PF_CUBLAS_CHECK(cublasSetStream(h, static_cast<cudaStream_t>(ctx_.stream.handle)));
    ctx_.blas = h;
  }
}

ExecResources::~ExecResources() {
  if (ctx_.blas) cublasDestroy(static_cast<cublasHandle_t>(ctx_.blas));
  destroy_stream(ctx_.stream);
}

}  // namespace pf
