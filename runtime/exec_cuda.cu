#include "runtime/cuda_check.cuh"
#include "runtime/cuda_launch.cuh"
#include "runtime/exec.h"

namespace pf {

ExecResources::ExecResources(Device device, MemoryTracker& tracker, const HostStreamConfig& host_streams) {
  PF_REQUIRE(ValueError, tracker.device() == device,
             "tracker for " << tracker.device().str() << " given for device " << device.str());
  ctx_.device = device;
  ctx_.tracker = &tracker;
  ctx_.stream = create_stream(device, host_streams);
  tracker.set_stream(ctx_.stream);
  if (device.is_cuda()) {
    // Keep freed memory in the stream-ordered pool instead of returning it to
    // the driver at every synchronisation.
    cudaMemPool_t pool = nullptr;
    PF_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device.index));
    uint64_t keep = UINT64_MAX;
    PF_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    cublasHandle_t h = nullptr;
    PF_CUBLAS_CHECK(cublasCreate(&h));
    PF_CUBLAS_CHECK(cublasSetStream(h, cuda_stream(ctx_)));
    ctx_.blas = h;
  }
}

ExecResources::~ExecResources() {
  if (ctx_.blas) cublasDestroy(static_cast<cublasHandle_t>(ctx_.blas));
  destroy_stream(ctx_.stream);
  ctx_.tracker->set_stream(Stream{ctx_.device, nullptr});
}

}  // namespace pf
