// The built-in sum combine (identity 0) on the host, and make_sum_combine,
// which hands CUDA devices to scan_cuda.cu.

#include "runtime/check.h"
#include "runtime/scan.h"
#include "runtime/scan_impl.h"
#include "runtime/scan_sum_math.h"

namespace pf {
namespace {

template <typename T>
class HostSumCombine final : public ScanCombine {
 public:
  DType dtype() const override { return dtype_of<T>::value; }
  Device device() const override { return Device::cpu(); }
  const char* name() const override { return "sum"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    fill_zero(stream, out, Device::cpu(), count * static_cast<int64_t>(sizeof(T)));
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    const T* a = static_cast<const T*>(earlier);
    const T* b = static_cast<const T*>(later);
    T* o = static_cast<T*>(out);
    host_launch(stream, [=] {
      for (int64_t i = 0; i < count; ++i) scan_sum_element(a, b, o, i);
    });
  }
};

}  // namespace

std::unique_ptr<ScanCombine> make_sum_combine(DType dtype, Device device) {
  PF_REQUIRE(ValueError, dtype == DType::f32 || dtype == DType::f64 || dtype == DType::i64,
             "the built-in sum combine supports f32, f64 and i64, not " << dtype_name(dtype));
  if (device.is_cuda()) return detail::make_sum_combine_cuda(dtype, device);
  switch (dtype) {
    case DType::f32: return std::make_unique<HostSumCombine<float>>();
    case DType::f64: return std::make_unique<HostSumCombine<double>>();
    default: return std::make_unique<HostSumCombine<int64_t>>();
  }
}

}  // namespace pf
