// Device pieces of the scans, defined in scan_cuda.cu (CUDA builds) or
// scan_nocuda.cc (host-only builds, where a CUDA device is an error).
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/scan.h"

namespace pf::detail {

// Elementwise sum combine on a CUDA device (f32, f64, i64).
std::unique_ptr<ScanCombine> make_sum_combine_cuda(DType dtype, Device device);

// The segmented combine's select on a CUDA device (runtime/scan_segment_math.h):
// the values of out from later and combined, then its flags from earlier and later.
void segment_select_cuda(DType dtype, const void* earlier, const void* later, const void* combined, void* out,
                         int64_t granules, int64_t g, const Stream& stream);

}  // namespace pf::detail
