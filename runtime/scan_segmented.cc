// The segmented combine (make_segmented_combine): each value of the inner
// combine carries a flag, "a segment starts here", and
//   (A, f) (+) (B, h) = (h ? B : A (+) B, f or h).
// This stays associative whatever the inner operator is: a scan with it
// stops each prefix at the last flag before it, so every scan algorithm
// computes the prefix of the current segment only (a packed sample's
// proteins, docs/comm.md#segmented-scans). Flags are stored as 0 or 1 in the inner dtype
// before each inner value: granule g + 1.
#include <string>

#include "runtime/check.h"
#include "runtime/exec.h"
#include "runtime/scan.h"
#include "runtime/scan_impl.h"
#include "runtime/scan_segment_math.h"

namespace pf {
namespace {

template <typename T>
void host_segment_select(const void* earlier, const void* later, const void* combined, void* out, int64_t granules,
                         int64_t g, const Stream& stream) {
  const T *ea = static_cast<const T*>(earlier), *la = static_cast<const T*>(later),
          *c = static_cast<const T*>(combined);
  T* o = static_cast<T*>(out);
  host_launch(stream, [=] {
    for (int64_t j = 0; j < granules; ++j)
      for (int64_t k = 0; k < g; ++k) segment_value_element(la, c, o, g, j, k);
    for (int64_t j = 0; j < granules; ++j) segment_flag_element(ea, la, o, g, j);
  });
}

class SegmentedCombine final : public ScanCombine {
 public:
  SegmentedCombine(const ScanCombine& inner, ScanWorkspace& scratch)
      : inner_(inner), scratch_(scratch), name_(std::string("segmented ") + inner.name()) {
    PF_REQUIRE(ValueError, inner.dtype() == DType::f32 || inner.dtype() == DType::f64 || inner.dtype() == DType::i64,
               "segmented combine of " << inner.name() << ": flags need f32, f64 or i64 values, not "
                                       << dtype_name(inner.dtype()));
    PF_REQUIRE(ValueError, scratch.device() == inner.device(),
               "segmented combine of " << inner.name() << " on " << inner.device().str() << " with scratch on "
                                       << scratch.device().str());
  }
  DType dtype() const override { return inner_.dtype(); }
  Device device() const override { return inner_.device(); }
  int64_t granule() const override { return inner_.granule() + 1; }
  const char* name() const override { return name_.c_str(); }

  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    const int64_t g = inner_.granule(), es = dtype_size(dtype());
    char* o = static_cast<char*>(out);
    for (int64_t j = 0; j < count / (g + 1); ++j) {
      fill_zero(stream, o + j * (g + 1) * es, device(), es);
      inner_.fill_identity(o + (j * (g + 1) + 1) * es, g, stream);
    }
  }

  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    const int64_t g = inner_.granule(), granules = count / (g + 1), es = dtype_size(dtype());
    if (granules == 0) return;
    // The inner combine of each value pair into scratch, side by side (one
    // call per value reads the operands in place: fewer passes over the data
    // than gathering them first), then the select.
    void* a = scratch_.buffer(0, granules * g * es, stream);
    const char *e = static_cast<const char*>(earlier), *l = static_cast<const char*>(later);
    for (int64_t j = 0; j < granules; ++j)
      inner_.combine(e + (j * (g + 1) + 1) * es, l + (j * (g + 1) + 1) * es, static_cast<char*>(a) + j * g * es, g,
                     stream);
    if (device().is_cuda()) {
      detail::segment_select_cuda(dtype(), earlier, later, a, out, granules, g, stream);
    } else {
      switch (dtype()) {
        case DType::f32: host_segment_select<float>(earlier, later, a, out, granules, g, stream); break;
        case DType::f64: host_segment_select<double>(earlier, later, a, out, granules, g, stream); break;
        default: host_segment_select<int64_t>(earlier, later, a, out, granules, g, stream); break;
      }
    }
  }

 private:
  const ScanCombine& inner_;
  ScanWorkspace& scratch_;
  std::string name_;
};

}  // namespace

std::unique_ptr<ScanCombine> make_segmented_combine(const ScanCombine& inner, ScanWorkspace& scratch) {
  return std::make_unique<SegmentedCombine>(inner, scratch);
}

}  // namespace pf
