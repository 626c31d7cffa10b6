// Device pieces of the scans in builds without the CUDA backend: asking for a
// CUDA device is a clear error.
#include "runtime/check.h"
#include "runtime/scan_impl.h"

namespace pf::detail {

std::unique_ptr<ScanCombine> make_sum_combine_cuda(DType dtype, Device device) {
  PF_REQUIRE(CudaError, false,
             "sum combine of " << dtype_name(dtype) << " on " << device.str() << " requested, but "
                               << cuda_unavailable_reason());
  return nullptr;
}

void segment_select_cuda(DType, const void*, const void*, const void*, void*, int64_t, int64_t, const Stream& stream) {
  PF_REQUIRE(CudaError, false, "segmented combine on " << stream.device.str() << ": " << cuda_unavailable_reason());
}

}  // namespace pf::detail
