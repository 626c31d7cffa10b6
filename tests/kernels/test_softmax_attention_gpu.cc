// Exact softmax attention on CUDA against the float64 reference (forward O and
// lse, backward dQ, dK, dV), causal and bidirectional, n not a multiple of the
// kernels' tiles, d in {16, 64, 128}, local windows of 1, 45 and 100 keys
// (d = 64), in fp32 and on tensor cores (TF32, bf16 operands); the one-query
// decode; with f16/bf16 storage against the reference on inputs rounded to
// the storage type; and both backwards' determinism. Skipped
// without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/device.h"
#include "runtime/exec.h"
#include "runtime/row_spans.h"
#include "tests/kernels/softmax_attention_support.h"
#include "tests/support/numerics.h"
#include "tests/support/storage.h"

namespace pf {
namespace {

using test::cast_vector;
using test::normal_vector;
using test::rel_l2;

// A device copy of a host vector, freed with the tracker.
class DeviceBuffer {
 public:
  DeviceBuffer(MemoryTracker& tracker, int64_t floats) : tracker_(tracker), bytes_(floats * 4) {
    ptr_ = static_cast<float*>(device_allocate(tracker_, bytes_, "test"));
  }
  ~DeviceBuffer() { device_free(tracker_, ptr_, bytes_, "test"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() { return ptr_; }
  void upload(const std::vector<float>& v) {
    copy_bytes_blocking(ptr_, tracker_.device(), v.data(), Device::cpu(), bytes_);
  }
  std::vector<float> download() {
    std::vector<float> v(static_cast<size_t>(bytes_ / 4));
    copy_bytes_blocking(v.data(), Device::cpu(), ptr_, tracker_.device(), bytes_);
    return v;
  }

 private:
  MemoryTracker& tracker_;
  int64_t bytes_;
  float* ptr_;
};

TEST(SoftmaxAttentionGpu, MatchesFloat64Reference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  MemoryTracker tracker(Device::cuda(0));
  ExecResources res(Device::cuda(0), tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 500;
  // The tensor-core tolerances: those of the emulated test (test_softmax_cuda_emulated.cc).
  for (TileMath math : {TileMath::Fp32, TileMath::Tf32, TileMath::Bf16})
    for (int64_t n : {1, 7, 64, 333, 1000})
      for (int64_t d : {16, 64, 128})
        for (int64_t window : {0, 1, 45, 100})
          for (bool causal : {false, true}) {
            if (window > 0 && d != 64) continue;  // windows: one head size
            SoftmaxAttentionParams p = softmax_attention_params(3, n, d, causal, window);
            p.tile_math = math;
            const double tol = math == TileMath::Bf16 ? 2.5e-2 : math == TileMath::Tf32 ? 3e-3 : 1e-5;
            const int64_t size = p.heads * n * d;
            const auto Qd = normal_vector(size, ++seed, 1), Kd = normal_vector(size, seed, 2),
                       Vd = normal_vector(size, seed, 3), dOd = normal_vector(size, seed, 4);
            std::vector<double> O(size), lse(p.heads * n), dQ(size), dK(size), dV(size);
            softmax_attention_forward_ref(p, Qd.data(), Kd.data(), Vd.data(), O.data(), lse.data());
            softmax_attention_backward_ref(p, Qd.data(), Kd.data(), Vd.data(), dOd.data(), dQ.data(), dK.data(),
                                           dV.data());
            DeviceBuffer q(tracker, size), k(tracker, size), v(tracker, size), o(tracker, size),
                l(tracker, p.heads * n), dout(tracker, size), dq(tracker, size), dk(tracker, size), dv(tracker, size);
            q.upload(cast_vector<float>(Qd));
            k.upload(cast_vector<float>(Kd));
            v.upload(cast_vector<float>(Vd));
            dout.upload(cast_vector<float>(dOd));
            softmax_attention_forward(ctx, p, q.get(), k.get(), v.get(), o.get(), l.get());
            softmax_attention_backward(ctx, p, q.get(), k.get(), v.get(), o.get(), l.get(), dout.get(), dq.get(),
                                       dk.get(), dv.get());
            synchronize(ctx.stream);
            const std::string what = "n=" + std::to_string(n) + " d=" + std::to_string(d) +
                                     " causal=" + std::to_string(causal) + " window=" + std::to_string(window) +
                                     " math=" + tile_math_name(math);
            EXPECT_LE(rel_l2(o.download(), O), tol) << what << " O";
            EXPECT_LE(rel_l2(l.download(), lse), tol) << what << " lse";
            // dQ and dK are exactly zero at n = 1: relative to dV's norm there.
            const double grad_norm = test::l2_norm(dV);
            EXPECT_LE(test::rel_l2_or(dq.download(), dQ, grad_norm), tol) << what << " dQ";
            EXPECT_LE(test::rel_l2_or(dk.download(), dK, grad_norm), tol) << what << " dK";
            EXPECT_LE(rel_l2(dv.download(), dV), tol) << what << " dV";
          }
}

// One query per head against its keys (the recurrent window's step): key
// counts around the kernel's 128-key tile, gaps between the heads' keys.
TEST(SoftmaxAttentionGpu, DecodeMatchesFloat64Reference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  MemoryTracker tracker(Device::cuda(0));
  ExecResources res(Device::cuda(0), tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 600;
  for (int64_t n : {1, 127, 129, 1000})
    for (int64_t d : {16, 64, 128}) {
      const softmax_test::DecodeCase c = softmax_test::make_case(5, n, d, 3, ++seed);
      const SoftmaxAttentionParams& p = c.p;
      const int64_t stride = c.stride;
      std::vector<double> want(c.q.size());
      softmax_attention_decode_ref(p, stride, c.q.data(), c.K.data(), c.V.data(), want.data());
      DeviceBuffer q(tracker, p.heads * d), k(tracker, p.heads * stride), v(tracker, p.heads * stride),
          o(tracker, p.heads * d);
      q.upload(cast_vector<float>(c.q));
      k.upload(cast_vector<float>(c.K));
      v.upload(cast_vector<float>(c.V));
      softmax_attention_decode(ctx, p, stride, q.get(), k.get(), v.get(), o.get());
      synchronize(ctx.stream);
      EXPECT_LE(rel_l2(o.download(), want), 1e-5) << "n=" << n << " d=" << d;
    }
}

using test::from_storage;
using test::to_storage;

// A 16-bit device buffer of `count` elements.
class DeviceHalves {
 public:
  DeviceHalves(MemoryTracker& tracker, int64_t count) : tracker_(tracker), count_(count) {
    ptr_ = device_allocate(tracker_, 2 * count_, "test");
  }
  ~DeviceHalves() { device_free(tracker_, ptr_, 2 * count_, "test"); }
  DeviceHalves(const DeviceHalves&) = delete;
  DeviceHalves& operator=(const DeviceHalves&) = delete;
  void* get() { return ptr_; }
  // Uploads x rounded to t; returns the rounded values (as doubles).
  std::vector<double> upload(const std::vector<double>& x, DType t) {
    std::vector<uint16_t> bits(x.size());
    std::vector<double> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      bits[i] = to_storage(static_cast<float>(x[i]), t);
      rounded[i] = from_storage(bits[i], t);
    }
    copy_bytes_blocking(ptr_, tracker_.device(), bits.data(), Device::cpu(), 2 * count_);
    return rounded;
  }
  std::vector<float> download(DType t) {
    std::vector<uint16_t> bits(static_cast<size_t>(count_));
    copy_bytes_blocking(bits.data(), Device::cpu(), ptr_, tracker_.device(), 2 * count_);
    std::vector<float> x(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) x[i] = from_storage(bits[i], t);
    return x;
  }

 private:
  MemoryTracker& tracker_;
  int64_t count_;
  void* ptr_;
};

// f16/bf16 storage, fp32 math: against the float64 reference evaluated on the
// rounded inputs. Every stored output is rounded once (unit roundoff 2^-11 for
// f16, 2^-8 for bf16, i.e. rel L2 ~ u/sqrt(3) per tensor), and the backward
// also sees the rounded O (in D = dO . O); the tolerances (rel L2 2e-3 for f16,
// 1e-2 for bf16) leave a few times that. lse is fp32 from the same rounded
// inputs, so it keeps the fp32 tolerance. Then each storage type on the
// tensor cores its model runs (f16: TF32 operands, bf16: bf16), whose
// rounded products move lse too: the tensor-core tolerances (3e-3, 2.5e-2).
TEST(SoftmaxAttentionGpu, HalfStorageMatchesFloat64Reference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  MemoryTracker tracker(Device::cuda(0));
  ExecResources res(Device::cuda(0), tracker);
  const ExecContext& ctx = res.ctx();
  uint64_t seed = 700;
  for (bool tensor_cores : {false, true})
    for (DType t : {DType::f16, DType::bf16})
      for (int64_t n : {7, 333})
        for (int64_t d : {16, 64})
          for (bool causal : {false, true}) {
            SoftmaxAttentionParams p = softmax_attention_params(2, n, d, causal);
            if (tensor_cores) p.tile_math = t == DType::f16 ? TileMath::Tf32 : TileMath::Bf16;
            const int64_t size = p.heads * n * d;
            DeviceHalves q(tracker, size), k(tracker, size), v(tracker, size), o(tracker, size), dout(tracker, size),
                dq(tracker, size), dk(tracker, size), dv(tracker, size);
            DeviceBuffer l(tracker, p.heads * n);
            const auto Qd = q.upload(normal_vector(size, ++seed, 1), t), Kd = k.upload(normal_vector(size, seed, 2), t),
                       Vd = v.upload(normal_vector(size, seed, 3), t),
                       dOd = dout.upload(normal_vector(size, seed, 4), t);
            std::vector<double> O(size), lse(p.heads * n), dQ(size), dK(size), dV(size);
            softmax_attention_forward_ref(p, Qd.data(), Kd.data(), Vd.data(), O.data(), lse.data());
            softmax_attention_backward_ref(p, Qd.data(), Kd.data(), Vd.data(), dOd.data(), dQ.data(), dK.data(),
                                           dV.data());
            softmax_attention_forward(ctx, p, t, q.get(), k.get(), v.get(), o.get(), l.get());
            softmax_attention_backward(ctx, p, t, q.get(), k.get(), v.get(), o.get(), l.get(), dout.get(), dq.get(),
                                       dk.get(), dv.get());
            synchronize(ctx.stream);
            const std::string what = std::string(dtype_name(t)) + " n=" + std::to_string(n) +
                                     " d=" + std::to_string(d) + " causal=" + std::to_string(causal) +
                                     " math=" + tile_math_name(p.tile_math);
            const double tol = !tensor_cores ? (t == DType::f16 ? 2e-3 : 1e-2) : (t == DType::f16 ? 3e-3 : 2.5e-2);
            EXPECT_LE(rel_l2(o.download(t), O), tol) << what << " O";
            EXPECT_LE(rel_l2(l.download(), lse), tensor_cores ? tol : 1e-5) << what << " lse";
            EXPECT_LE(rel_l2(dq.download(t), dQ), tol) << what << " dQ";
            EXPECT_LE(rel_l2(dk.download(t), dK), tol) << what << " dK";
            EXPECT_LE(rel_l2(dv.download(t), dV), tol) << what << " dV";
          }
  EXPECT_EQ(tracker.stats().current_bytes, 0);
}

// Two backward runs of p on the same inputs give the same bits.
void expect_backward_deterministic(MemoryTracker& tracker, const ExecContext& ctx, const SoftmaxAttentionParams& p) {
  const std::string what = std::string(tile_math_name(p.tile_math)) + " causal=" + std::to_string(p.causal) +
                           " window=" + std::to_string(p.window);
  const int64_t size = p.heads * p.n * p.d;
  DeviceBuffer q(tracker, size), k(tracker, size), v(tracker, size), o(tracker, size), l(tracker, p.heads * p.n),
      dout(tracker, size), dq(tracker, size), dk(tracker, size), dv(tracker, size);
  q.upload(cast_vector<float>(normal_vector(size, 31, 1)));
  k.upload(cast_vector<float>(normal_vector(size, 31, 2)));
  v.upload(cast_vector<float>(normal_vector(size, 31, 3)));
  dout.upload(cast_vector<float>(normal_vector(size, 31, 4)));
  softmax_attention_forward(ctx, p, q.get(), k.get(), v.get(), o.get(), l.get());
  std::vector<float> first[3];
  for (int run = 0; run < 2; ++run) {
    softmax_attention_backward(ctx, p, q.get(), k.get(), v.get(), o.get(), l.get(), dout.get(), dq.get(), dk.get(),
                               dv.get());
    synchronize(ctx.stream);
    const std::vector<float> got[3] = {dq.download(), dk.download(), dv.download()};
    for (int i = 0; i < 3; ++i) {
      if (run == 0)
        first[i] = got[i];
      else
        EXPECT_EQ(got[i], first[i]) << what << " output " << i;
    }
  }
}

// The tensor-core backward writes each of dQ, dK, dV once, in a fixed order
// (no atomics): two runs give the same bits.
TEST(SoftmaxAttentionGpu, TensorCoreBackwardIsDeterministic) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  MemoryTracker tracker(Device::cuda(0));
  ExecResources res(Device::cuda(0), tracker);
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
    SoftmaxAttentionParams p = softmax_attention_params(4, 1000, 64, true, 100);
    p.tile_math = math;
    expect_backward_deterministic(tracker, res.ctx(), p);
  }
}

// So does the fp32 kernels' backward (dQ by a kernel of its own, no
// atomics): causal with a window, and bidirectional, where every key tile's
// block reaches the same queries.
TEST(SoftmaxAttentionGpu, Fp32BackwardIsDeterministic) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  MemoryTracker tracker(Device::cuda(0));
  ExecResources res(Device::cuda(0), tracker);
  for (bool causal : {true, false}) {
    SoftmaxAttentionParams p = softmax_attention_params(4, 1000, 64, causal, causal ? 100 : 0);
    p.tile_math = TileMath::Fp32;
    expect_backward_deterministic(tracker, res.ctx(), p);
  }
}

// One call over pieces of rows (one launch per kernel over all pieces) gives
// each piece the bits of a call on that piece alone, on the tensor-core
// kernels and on the fp32 kernels; rows between the pieces keep what they
// held.
TEST(SoftmaxAttentionGpu, PiecesEqualPieceByPiece) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  MemoryTracker tracker(Device::cuda(0));
  ExecResources res(Device::cuda(0), tracker);
  const ExecContext& ctx = res.ctx();
  const int64_t total = 700, d = 64;
  const std::vector<RowSpan> spans = {{0, 300, 0}, {310, 1, 0}, {320, 0, 0}, {330, 65, 0}, {400, 290, 0}};
  const RowSpans pieces(ctx, spans);
  const int64_t size = total * d;
  for (TileMath math : {TileMath::Fp32, TileMath::Tf32, TileMath::Bf16})
    for (int64_t window : {0, 100})
      for (bool causal : {false, true}) {
        const std::string what = "math=" + std::string(tile_math_name(math)) + " window=" + std::to_string(window) +
                                 " causal=" + std::to_string(causal);
        DeviceBuffer q(tracker, size), k(tracker, size), v(tracker, size), dout(tracker, size);
        q.upload(cast_vector<float>(normal_vector(size, 41, 1)));
        k.upload(cast_vector<float>(normal_vector(size, 41, 2)));
        v.upload(cast_vector<float>(normal_vector(size, 41, 3)));
        dout.upload(cast_vector<float>(normal_vector(size, 41, 4)));
        const std::vector<float> sentinel(static_cast<size_t>(size), 7.f),
            lse_sentinel(static_cast<size_t>(total), 7.f);
        // [0]: one call over the pieces, [1]: a call per piece on its rows.
        DeviceBuffer o[2] = {{tracker, size}, {tracker, size}}, l[2] = {{tracker, total}, {tracker, total}},
                     dq[2] = {{tracker, size}, {tracker, size}}, dk[2] = {{tracker, size}, {tracker, size}},
                     dv[2] = {{tracker, size}, {tracker, size}};
        for (int w = 0; w < 2; ++w) {
          for (DeviceBuffer* b : {&o[w], &dq[w], &dk[w], &dv[w]}) b->upload(sentinel);
          l[w].upload(lse_sentinel);
        }
        SoftmaxAttentionParams p = softmax_pieces_params(softmax_attention_params(1, total, d, causal, window), pieces);
        p.tile_math = math;
        softmax_attention_forward(ctx, p, q.get(), k.get(), v.get(), o[0].get(), l[0].get());
        softmax_attention_backward(ctx, p, q.get(), k.get(), v.get(), o[0].get(), l[0].get(), dout.get(), dq[0].get(),
                                   dk[0].get(), dv[0].get());
        for (const RowSpan& x : spans) {
          if (x.len == 0) continue;
          SoftmaxAttentionParams one = softmax_attention_params(1, x.len, d, causal, window);
          one.tile_math = math;
          const int64_t e = x.row0 * d;
          softmax_attention_forward(ctx, one, q.get() + e, k.get() + e, v.get() + e, o[1].get() + e,
                                    l[1].get() + x.row0);
          softmax_attention_backward(ctx, one, q.get() + e, k.get() + e, v.get() + e, o[1].get() + e,
                                     l[1].get() + x.row0, dout.get() + e, dq[1].get() + e, dk[1].get() + e,
                                     dv[1].get() + e);
        }
        synchronize(ctx.stream);
        EXPECT_EQ(o[0].download(), o[1].download()) << what << " O";
        EXPECT_EQ(l[0].download(), l[1].download()) << what << " lse";
        EXPECT_EQ(dq[0].download(), dq[1].download()) << what << " dQ";
        EXPECT_EQ(dk[0].download(), dk[1].download()) << what << " dK";
        EXPECT_EQ(dv[0].download(), dv[1].download()) << what << " dV";
        const std::vector<float> gap = o[0].download();
        EXPECT_EQ(gap[static_cast<size_t>(305 * d)], 7.f) << what << " a row between the pieces was written";
      }
}

}  // namespace
}  // namespace pf
