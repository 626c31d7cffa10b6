// Exact softmax attention on CUDA against the float64 reference (forward O and
// lse, backward dQ, dK, dV), causal and bidirectional, n not a multiple of the
// kernels' tiles, d in {16, 64, 128}. Skipped without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/device.h"
#include "runtime/exec.h"
#include "tests/support/numerics.h"

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
  void upload(const std::vector<float>& v) { copy_bytes(ptr_, tracker_.device(), v.data(), Device::cpu(), bytes_); }
  std::vector<float> download() {
    std::vector<float> v(static_cast<size_t>(bytes_ / 4));
    copy_bytes(v.data(), Device::cpu(), ptr_, tracker_.device(), bytes_);
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
  for (int64_t n : {1, 7, 64, 333, 1000})
    for (int64_t d : {16, 64, 128})
      for (bool causal : {false, true}) {
        SoftmaxAttentionParams p;
        p.heads = 3;
        p.n = n;
        p.d = d;
        p.causal = causal;
        const int64_t size = p.heads * n * d;
        const auto Qd = normal_vector(size, ++seed, 1), Kd = normal_vector(size, seed, 2),
                   Vd = normal_vector(size, seed, 3), dOd = normal_vector(size, seed, 4);
        std::vector<double> O(size), lse(p.heads * n), dQ(size), dK(size), dV(size);
        softmax_attention_forward_ref(p, Qd.data(), Kd.data(), Vd.data(), O.data(), lse.data());
        softmax_attention_backward_ref(p, Qd.data(), Kd.data(), Vd.data(), dOd.data(), dQ.data(), dK.data(), dV.data());
        DeviceBuffer q(tracker, size), k(tracker, size), v(tracker, size), o(tracker, size), l(tracker, p.heads * n),
            dout(tracker, size), dq(tracker, size), dk(tracker, size), dv(tracker, size);
        q.upload(cast_vector<float>(Qd));
        k.upload(cast_vector<float>(Kd));
        v.upload(cast_vector<float>(Vd));
        dout.upload(cast_vector<float>(dOd));
        softmax_attention_forward(ctx, p, q.get(), k.get(), v.get(), o.get(), l.get());
        softmax_attention_backward(ctx, p, q.get(), k.get(), v.get(), o.get(), l.get(), dout.get(), dq.get(), dk.get(),
                                   dv.get());
        synchronize(ctx.stream);
        const std::string what =
            "n=" + std::to_string(n) + " d=" + std::to_string(d) + " causal=" + std::to_string(causal);
        EXPECT_LE(rel_l2(o.download(), O), 1e-5) << what << " O";
        EXPECT_LE(rel_l2(l.download(), lse), 1e-5) << what << " lse";
        EXPECT_LE(rel_l2(dq.download(), dQ), 1e-5) << what << " dQ";
        EXPECT_LE(rel_l2(dk.download(), dK), 1e-5) << what << " dK";
        EXPECT_LE(rel_l2(dv.download(), dV), 1e-5) << what << " dV";
      }
}

}  // namespace
}  // namespace pf
