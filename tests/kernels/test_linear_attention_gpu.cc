// Linear attention on CUDA against the float64 reference (causal and
// bidirectional, forward and backward, n not a multiple of the chunk), the
// causal protocol over three blocks with the scans combined on the device, and
// the device state combine against the host one. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/kernels/test_linear_attention_support.h"

namespace pf {
namespace {

using test::LinAttnProblem;
using test::rel_l2;

class Gpu {
 public:
  Gpu() : tracker_(Device::cuda(0)), res_(Device::cuda(0), tracker_) {}
  const ExecContext& ctx() const { return res_.ctx(); }
  float* alloc(int64_t count) {
    const int64_t bytes = std::max<int64_t>(count, 1) * 4;
    float* p = static_cast<float*>(device_allocate(tracker_, bytes, "test"));
    fill_zero(p, Device::cuda(0), bytes);
    buffers_.push_back({p, bytes});
    return p;
  }
  float* upload(const std::vector<float>& x) {
    float* p = alloc(static_cast<int64_t>(x.size()));
    copy_bytes(p, Device::cuda(0), x.data(), Device::cpu(), static_cast<int64_t>(x.size()) * 4);
    return p;
  }
  std::vector<float> download(const float* p, int64_t count) {
    synchronize(ctx().stream);
    std::vector<float> x(count);
    copy_bytes(x.data(), Device::cpu(), p, Device::cuda(0), count * 4);
    return x;
  }
  ~Gpu() {
    for (auto& b : buffers_) device_free(tracker_, b.first, b.second, "test");
  }

 private:
  MemoryTracker tracker_;
  ExecResources res_;
  std::vector<std::pair<float*, int64_t>> buffers_;
};

struct DeviceRun {
  std::vector<float> o, dq, dk, dv;
};

DeviceRun run_on_device(Gpu& gpu, const LinAttnProblem& p, bool causal) {
  const LinAttnShape& s = p.s;
  const ExecContext& ctx = gpu.ctx();
  float *q = gpu.upload(p.pq), *k = gpu.upload(p.pk), *c = gpu.upload(p.ck), *v = gpu.upload(p.v),
        *g = gpu.upload(p.d_o);
  float *y = gpu.alloc(s.heads * s.n * (s.d + 1)), *L = gpu.alloc(s.heads * s.n), *o = gpu.alloc(s.heads * s.n * s.d),
        *den = gpu.alloc(s.heads * s.n), *dq = gpu.alloc(s.heads * s.n * s.m), *dk = gpu.alloc(s.heads * s.n * s.m),
        *dv = gpu.alloc(s.heads * s.n * s.d), *T = gpu.alloc(s.heads * s.state_size()),
        *U = gpu.alloc(s.heads * s.state_size());
  if (causal) {
    causal_linear_attention_forward_local(ctx, s, q, k, c, v, y, L, T, nullptr);
    linear_attention_normalize(ctx, s, y, o, den);
    causal_linear_attention_backward_local(ctx, s, q, k, c, v, o, den, L, g, dq, dk, dv, U, nullptr, nullptr);
  } else {
    bidirectional_linear_attention_local_state(ctx, s, k, c, v, T);
    bidirectional_linear_attention_forward_finish(ctx, s, q, T, y, L);
    linear_attention_normalize(ctx, s, y, o, den);
    bidirectional_linear_attention_backward_local(ctx, s, q, o, den, L, g, T, dq, U);
    bidirectional_linear_attention_backward_finish(ctx, s, k, c, v, U, dk, dv);
  }
  return {gpu.download(o, s.heads * s.n * s.d), gpu.download(dq, s.heads * s.n * s.m),
          gpu.download(dk, s.heads * s.n * s.m), gpu.download(dv, s.heads * s.n * s.d)};
}

TEST(LinearAttentionGpu, MatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Gpu gpu;
  struct Case {
    int64_t heads, n, m, d, chunk;
  };
  uint64_t seed = 1000;
  for (bool causal : {true, false})
    for (Case c : {Case{2, 1, 16, 16, 64}, Case{2, 7, 64, 32, 4}, Case{3, 300, 100, 64, 64},
                   Case{1, 1000, 256, 64, 128}, Case{2, 999, 16, 16, 256}}) {
      const auto p = test::make_problem(c.heads, c.n, c.m, c.d, c.chunk, seed++, 2.f);
      const auto r = test::reference(p, causal, true);
      const auto got = run_on_device(gpu, p, causal);
      const std::string tag = std::string(causal ? "causal" : "bidirectional") + " n=" + std::to_string(c.n) +
                              " m=" + std::to_string(c.m) + " d=" + std::to_string(c.d);
      EXPECT_LE(rel_l2(got.o, r.o), 1e-5) << tag;
      EXPECT_LE(rel_l2(got.dv, r.dv), 1e-5) << tag;
      if (c.n > 1) {
        EXPECT_LE(rel_l2(got.dq, r.dq), 1e-5) << tag;
        EXPECT_LE(rel_l2(got.dk, r.dk), 1e-5) << tag;
      }
      // Wide key log-scales: forward against the reference, everything finite.
      const auto w = test::make_problem(c.heads, c.n, c.m, c.d, c.chunk, seed++, 80.f);
      const auto gw = run_on_device(gpu, w, causal);
      EXPECT_LE(rel_l2(gw.o, test::reference(w, causal, false).o), 1e-5) << "wide " << tag;
      for (const auto* x : {&gw.o, &gw.dq, &gw.dk, &gw.dv})
        for (float e : *x) ASSERT_TRUE(std::isfinite(e)) << "wide " << tag;
    }
}

// Three blocks, exclusive scans with the device combine, prefix/suffix added in
// the one-call form; equals the whole sequence on the CPU.
TEST(LinearAttentionGpu, BlocksWithDeviceScansEqualWhole) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Gpu gpu;
  const ExecContext& ctx = gpu.ctx();
  const auto p = test::make_problem(2, 500, 64, 32, 64, 1100);
  const auto whole_f = test::forward_cpu(p, true);
  const auto whole_b = test::backward_cpu(p, whole_f, true);
  const LinAttnShape& s = p.s;
  const int64_t cuts[] = {0, 3, 260, 500};
  float *q = gpu.upload(p.pq), *k = gpu.upload(p.pk), *c = gpu.upload(p.ck), *v = gpu.upload(p.v),
        *g = gpu.upload(p.d_o);
  float *y = gpu.alloc(s.heads * s.n * (s.d + 1)), *L = gpu.alloc(s.heads * s.n), *o = gpu.alloc(s.heads * s.n * s.d),
        *den = gpu.alloc(s.heads * s.n), *dq = gpu.alloc(s.heads * s.n * s.m), *dk = gpu.alloc(s.heads * s.n * s.m),
        *dv = gpu.alloc(s.heads * s.n * s.d);
  // A block of one head is a contiguous row range: blocks run per head (heads = 1)
  // in place inside the whole arrays; the states are per head at h * size.
  const int64_t size = s.state_size();
  std::vector<float*> T(3), U(3), pre(3), suf(3);
  for (int r = 0; r < 3; ++r) {
    T[r] = gpu.alloc(s.heads * size);
    U[r] = gpu.alloc(s.heads * size);
    pre[r] = gpu.alloc(s.heads * size);
    suf[r] = gpu.alloc(s.heads * size);
  }
  linear_attention_state_clear(ctx, s, pre[0]);
  linear_attention_state_clear(ctx, s, suf[2]);
  for (int h = 0; h < s.heads; ++h) {
    for (int r = 0; r < 3; ++r) {
      LinAttnShape b = s;
      b.heads = 1;
      b.n = cuts[r + 1] - cuts[r];
      const int64_t row = h * s.n + cuts[r];
      causal_linear_attention_forward_local(ctx, b, q + row * s.m, k + row * s.m, c + row, v + row * s.d,
                                            y + row * (s.d + 1), L + row, T[r] + h * size, nullptr);
    }
  }
  for (int r = 1; r < 3; ++r) linear_attention_state_combine(ctx, s.heads, s.m, s.d, pre[r - 1], T[r - 1], pre[r]);
  for (int h = 0; h < s.heads; ++h)
    for (int r = 0; r < 3; ++r) {
      LinAttnShape b = s;
      b.heads = 1;
      b.n = cuts[r + 1] - cuts[r];
      const int64_t row = h * s.n + cuts[r];
      linear_attention_add_prefix(ctx, b, q + row * s.m, pre[r] + h * size, y + row * (s.d + 1), L + row);
      linear_attention_normalize(ctx, b, y + row * (s.d + 1), o + row * s.d, den + row);
      causal_linear_attention_backward_local(ctx, b, q + row * s.m, k + row * s.m, c + row, v + row * s.d,
                                             o + row * s.d, den + row, L + row, g + row * s.d, dq + row * s.m,
                                             dk + row * s.m, dv + row * s.d, U[r] + h * size, nullptr, nullptr);
    }
  for (int r = 1; r >= 0; --r) linear_attention_state_combine(ctx, s.heads, s.m, s.d, U[r + 1], suf[r + 1], suf[r]);
  for (int h = 0; h < s.heads; ++h)
    for (int r = 0; r < 3; ++r) {
      LinAttnShape b = s;
      b.heads = 1;
      b.n = cuts[r + 1] - cuts[r];
      const int64_t row = h * s.n + cuts[r];
      linear_attention_backward_add_prefix(ctx, b, o + row * s.d, den + row, L + row, g + row * s.d, pre[r] + h * size,
                                           dq + row * s.m);
      linear_attention_backward_add_suffix(ctx, b, k + row * s.m, c + row, v + row * s.d, suf[r] + h * size,
                                           dk + row * s.m, dv + row * s.d);
    }
  EXPECT_LE(rel_l2(gpu.download(o, s.heads * s.n * s.d), whole_f.o), 1e-5);
  EXPECT_LE(rel_l2(gpu.download(dq, s.heads * s.n * s.m), whole_b.dq), 1e-5);
  EXPECT_LE(rel_l2(gpu.download(dk, s.heads * s.n * s.m), whole_b.dk), 1e-5);
  EXPECT_LE(rel_l2(gpu.download(dv, s.heads * s.n * s.d), whole_b.dv), 1e-5);
}

TEST(LinearAttentionGpu, StateCombineMatchesHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Gpu gpu;
  const LinAttnShape s{3, 0, 16, 8, 1};
  auto x = test::cast_vector<float>(test::normal_vector(s.heads * s.state_size(), 1));
  auto y = test::cast_vector<float>(test::normal_vector(s.heads * s.state_size(), 2));
  for (int64_t h = 0; h < s.heads; ++h) {
    x[h * s.state_size()] *= 30.f;
    y[h * s.state_size()] *= 30.f;
  }
  std::vector<float> want(x.size());
  linear_attention_state_combine(ExecContext{}, s.heads, s.m, s.d, x.data(), y.data(), want.data());
  float *dx = gpu.upload(x), *dy = gpu.upload(y);
  linear_attention_state_combine(gpu.ctx(), s.heads, s.m, s.d, dx, dy, dx);  // aliased output
  EXPECT_LE(rel_l2(gpu.download(dx, static_cast<int64_t>(x.size())), want), 1e-6);
}

}  // namespace
}  // namespace pf
