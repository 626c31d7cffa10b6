// The linear-attention state combines as scan operators (runtime/scan.h),
// their kernels on the stream the scan gives (the communicator's):
//   StateCombine           granule 1 + m (d+1): the log-scale state combine
//   SegmentedStateCombine  granule 2 + m (d+1): a flag before each state and
//                          the segmented combine (h ? B : A (+) B, f or h)
//                          with the select inside the state combine
//                          (linear_attention_segmented_state_combine; on
//                          CUDA the matrix, then the flags and log-scales,
//                          as the plain combine): the values of
//                          make_segmented_combine(StateCombine) without its
//                          scratch and separate select pass.
#pragma once

#include <cstdint>

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/exec.h"
#include "runtime/scan.h"

namespace pf {

// What both combines share: f32 states of m (d+1) values on ctx's device,
// run on the stream the scan gives.
class LinearStateScanCombine : public ScanCombine {
 public:
  LinearStateScanCombine(const ExecContext& ctx, int64_t m, int64_t d) : ctx_(ctx), m_(m), d_(d) {}
  DType dtype() const override { return DType::f32; }
  Device device() const override { return ctx_.device; }

 protected:
  ExecContext ctx_;
  int64_t m_, d_;
};

class StateCombine : public LinearStateScanCombine {
 public:
  using LinearStateScanCombine::LinearStateScanCombine;
  int64_t granule() const override { return 1 + m_ * (d_ + 1); }
  const char* name() const override { return "linear_attention_state"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    LinAttnShape s;
    s.heads = count / granule();
    s.m = m_;
    s.d = d_;
    linear_attention_state_clear(ctx_.on(stream), s, static_cast<float*>(out));
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    linear_attention_state_combine(ctx_.on(stream), count / granule(), m_, d_, static_cast<const float*>(earlier),
                                   static_cast<const float*>(later), static_cast<float*>(out));
  }
};

class SegmentedStateCombine : public LinearStateScanCombine {
 public:
  using LinearStateScanCombine::LinearStateScanCombine;
  int64_t granule() const override { return 2 + m_ * (d_ + 1); }
  const char* name() const override { return "segmented linear_attention_state"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    linear_attention_segmented_state_clear(ctx_.on(stream), count / granule(), m_, d_, static_cast<float*>(out));
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    linear_attention_segmented_state_combine(ctx_.on(stream), count / granule(), m_, d_,
                                             static_cast<const float*>(earlier), static_cast<const float*>(later),
                                             static_cast<float*>(out));
  }
};

}  // namespace pf
