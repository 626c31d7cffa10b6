// CUDA position-wise ops against the float64 references: linear, layer norm,
// GELU, residual add, the gated mix, embedding (with repeated ids), cross-entropy (ignored
// targets, huge logits), AdamW, sum of squares, f16/bf16 conversions and the
// 16-bit-operand linear layer. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <utility>

#include "kernels/adamw/adamw.h"
#include "kernels/cast/cast.h"
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/embedding/embedding.h"
#include "kernels/gated_mix/gated_mix.h"
#include "kernels/gelu/gelu.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/linear/linear.h"
#include "kernels/reduce/reduce.h"
#include "kernels/residual/residual.h"
#include "runtime/device.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using test::Pair;
using test::random_pair;
using test::rel_l2;

// A device copy of a host vector, freed on scope exit.
template <typename T>
class DeviceVector {
 public:
  DeviceVector(MemoryTracker& tracker, const std::vector<T>& host)
      : tracker_(tracker),
        n_(static_cast<int64_t>(host.size())),
        ptr_(static_cast<T*>(device_allocate(tracker, bytes(), "test"))) {
    copy_bytes_blocking(ptr_, tracker.device(), host.data(), Device::cpu(), bytes());
  }
  ~DeviceVector() { device_free(tracker_, ptr_, bytes(), "test"); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() { return ptr_; }
  std::vector<T> host() const {
    std::vector<T> out(static_cast<size_t>(n_));
    copy_bytes_blocking(out.data(), Device::cpu(), ptr_, tracker_.device(), bytes());
    return out;
  }

 private:
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(T)); }
  MemoryTracker& tracker_;
  int64_t n_;
  T* ptr_;
};

class PosopsGpu : public testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
    tracker_ = std::make_unique<MemoryTracker>(Device::cuda(0));
    res_ = std::make_unique<ExecResources>(Device::cuda(0), *tracker_);
  }
  void TearDown() override {
    res_.reset();
    tracker_.reset();
  }
  const ExecContext& ctx() const { return res_->ctx(); }
  MemoryTracker& tracker() { return *tracker_; }
  template <typename T>
  std::unique_ptr<DeviceVector<T>> up(const std::vector<T>& v) {
    return std::make_unique<DeviceVector<T>>(*tracker_, v);
  }

 private:
  std::unique_ptr<MemoryTracker> tracker_;
  std::unique_ptr<ExecResources> res_;
};

TEST_F(PosopsGpu, Linear) {
  for (auto [T, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 13, 7}, {7, 30, 100}, {300, 100, 13}}) {
    SCOPED_TRACE(testing::Message() << "T=" << T << " in=" << in << " out=" << out);
    Pair X = random_pair(T * in, 1, 1), W = random_pair(out * in, 1, 2, 0.2), b = random_pair(out, 1, 3),
         dY = random_pair(T * out, 1, 4), dW = random_pair(out * in, 1, 5), db = random_pair(out, 1, 6);
    auto dX_ = up(std::vector<float>(T * in)), Y_ = up(std::vector<float>(T * out));
    auto X_ = up(X.f), W_ = up(W.f), b_ = up(b.f), dY_ = up(dY.f), dW_ = up(dW.f), db_ = up(db.f);
    linear_forward(ctx(), X_->get(), W_->get(), b_->get(), Y_->get(), T, in, out);
    linear_backward(ctx(), dY_->get(), X_->get(), W_->get(), dX_->get(), dW_->get(), db_->get(), T, in, out);
    synchronize(ctx().stream);
    std::vector<double> Y(T * out), dX(T * in);
    linear_forward_ref(X.d.data(), W.d.data(), b.d.data(), Y.data(), T, in, out);
    linear_backward_ref(dY.d.data(), X.d.data(), W.d.data(), dX.data(), dW.d.data(), db.d.data(), T, in, out);
    EXPECT_LE(rel_l2(Y_->host(), Y), 1e-5);
    EXPECT_LE(rel_l2(dX_->host(), dX), 1e-5);
    EXPECT_LE(rel_l2(dW_->host(), dW.d), 1e-5);
    EXPECT_LE(rel_l2(db_->host(), db.d), 1e-5);
  }
}

// 16-bit operands with fp32 accumulation (cublasGemmEx) against the float64
// reference on the rounded operands (K up to 300), within the accumulation
// order of tensor cores; the conversions against the reference rounding.
TEST_F(PosopsGpu, CastAndLowpLinear) {
  for (DType t : {DType::f16, DType::bf16})
    for (auto [T, in, out] : {std::tuple<int64_t, int64_t, int64_t>{1, 13, 7}, {300, 100, 13}, {256, 64, 192}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " T=" << T << " in=" << in << " out=" << out);
      Pair X = random_pair(T * in, 2, 1), W = random_pair(out * in, 2, 2, 0.2), b = random_pair(out, 2, 3),
           dY = random_pair(T * out, 2, 4, 1e-3), dW = random_pair(out * in, 2, 5), db = random_pair(out, 2, 6);
      auto X_ = up(X.f), W_ = up(W.f), b_ = up(b.f), dY_ = up(dY.f), dW_ = up(dW.f), db_ = up(db.f);
      auto X16 = up(std::vector<uint16_t>(T * in)), W16 = up(std::vector<uint16_t>(out * in));
      auto Xw = up(std::vector<float>(T * in)), Y_ = up(std::vector<float>(T * out)),
           dX_ = up(std::vector<float>(T * in));
      cast_narrow(ctx(), t, X_->get(), X16->get(), T * in);
      cast_narrow(ctx(), t, W_->get(), W16->get(), out * in);
      cast_widen(ctx(), t, X16->get(), Xw->get(), T * in);
      linear_forward_lowp(ctx(), t, X16->get(), W16->get(), b_->get(), Y_->get(), T, in, out);
      linear_backward_lowp(ctx(), t, dY_->get(), X16->get(), W16->get(), dX_->get(), dW_->get(), db_->get(), T, in,
                           out);
      synchronize(ctx().stream);
      auto rounded = [t](const std::vector<double>& v) {
        std::vector<double> r(v.size());
        for (size_t i = 0; i < v.size(); ++i) r[i] = round_to_storage_ref(static_cast<float>(v[i]), t);
        return r;
      };
      const std::vector<double> Xr = rounded(X.d), Wr = rounded(W.d), dYr = rounded(dY.d);
      const std::vector<float> xw = Xw->host();
      for (size_t i = 0; i < xw.size(); ++i) ASSERT_EQ(static_cast<double>(xw[i]), Xr[i]) << "element " << i;
      std::vector<double> Y(T * out), dX(T * in);
      linear_forward_ref(Xr.data(), Wr.data(), b.d.data(), Y.data(), T, in, out);
      linear_backward_ref(dYr.data(), Xr.data(), Wr.data(), dX.data(), dW.d.data(), db.d.data(), T, in, out);
      // Tensor cores sum the exact 16-bit products in fp32 in their own order
      // and may align partial sums with truncation: allow K units of 2^-22
      // for a sum of K products (a 16-bit rounding of any result, 2^-8 or
      // 2^-11, still fails by far).
      auto tol = [](int64_t K) { return 1e-6 + static_cast<double>(K) * std::ldexp(1.0, -22); };
      EXPECT_LE(rel_l2(Y_->host(), Y), tol(in));
      EXPECT_LE(rel_l2(dX_->host(), dX), tol(out));
      EXPECT_LE(rel_l2(dW_->host(), dW.d), tol(T));
      EXPECT_LE(rel_l2(db_->host(), db.d), tol(T));
    }
}

TEST_F(PosopsGpu, LayerNorm) {
  for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 13}, {7, 100}, {300, 256}}) {
    SCOPED_TRACE(testing::Message() << "T=" << T << " C=" << C);
    Pair X = random_pair(T * C, 2, 1, 2.0, 3.0), g = random_pair(C, 2, 2, 0.1, 1.0), b = random_pair(C, 2, 3),
         dY = random_pair(T * C, 2, 4), dg = random_pair(C, 2, 5), db = random_pair(C, 2, 6);
    auto X_ = up(X.f), g_ = up(g.f), b_ = up(b.f), dY_ = up(dY.f), dg_ = up(dg.f), db_ = up(db.f);
    auto Y_ = up(std::vector<float>(T * C)), dX_ = up(std::vector<float>(T * C));
    auto mean_ = up(std::vector<float>(T)), rstd_ = up(std::vector<float>(T));
    layernorm_forward(ctx(), X_->get(), g_->get(), b_->get(), Y_->get(), mean_->get(), rstd_->get(), T, C);
    layernorm_backward(ctx(), dY_->get(), X_->get(), g_->get(), mean_->get(), rstd_->get(), dX_->get(), dg_->get(),
                       db_->get(), T, C);
    synchronize(ctx().stream);
    std::vector<double> Y(T * C), mean(T), rstd(T), dX(T * C);
    layernorm_forward_ref(X.d.data(), g.d.data(), b.d.data(), Y.data(), mean.data(), rstd.data(), T, C, 1e-5);
    layernorm_backward_ref(dY.d.data(), X.d.data(), g.d.data(), mean.data(), rstd.data(), dX.data(), dg.d.data(),
                           db.d.data(), T, C);
    EXPECT_LE(rel_l2(Y_->host(), Y), 1e-5);
    EXPECT_LE(rel_l2(mean_->host(), mean), 1e-5);
    EXPECT_LE(rel_l2(rstd_->host(), rstd), 1e-5);
    EXPECT_LE(rel_l2(dX_->host(), dX), 1e-5);
    EXPECT_LE(rel_l2(dg_->host(), dg.d), 1e-5);
    EXPECT_LE(rel_l2(db_->host(), db.d), 1e-5);
  }
}

TEST_F(PosopsGpu, GeluAndResidual) {
  const int64_t n = 7 * 100 + 3;
  Pair X = random_pair(n, 3, 1, 2.0), dY = random_pair(n, 3, 2);
  auto X_ = up(X.f), dY_ = up(dY.f), Y_ = up(std::vector<float>(n)), dX_ = up(std::vector<float>(n));
  gelu_forward(ctx(), X_->get(), Y_->get(), n);
  gelu_backward(ctx(), dY_->get(), X_->get(), dX_->get(), n);
  residual_add(ctx(), dY_->get(), X_->get(), dY_->get(), n);
  synchronize(ctx().stream);
  std::vector<double> Y(n), dX(n), sum(n);
  gelu_forward_ref(X.d.data(), Y.data(), n);
  gelu_backward_ref(dY.d.data(), X.d.data(), dX.data(), n);
  residual_add_ref(dY.d.data(), X.d.data(), sum.data(), n);
  EXPECT_LE(rel_l2(Y_->host(), Y), 1e-5);
  EXPECT_LE(rel_l2(dX_->host(), dX), 1e-5);
  EXPECT_LE(rel_l2(dY_->host(), sum), 1e-6);
}

TEST_F(PosopsGpu, GatedMix) {
  const GatedMixShape s{3, 4, 1000, 24};
  const int64_t N = s.total();
  Pair gate = random_pair(s.heads, 5, 1, 3.0), a = random_pair(N, 5, 2), b = random_pair(N, 5, 3),
       dout = random_pair(N, 5, 4);
  auto g_ = up(gate.f), a_ = up(a.f), b_ = up(b.f), dout_ = up(dout.f), out_ = up(std::vector<float>(N)),
       da_ = up(std::vector<float>(N)), db_ = up(std::vector<float>(N)), dg_ = up(std::vector<float>(s.heads, 0.5f));
  gated_mix_forward(ctx(), s, g_->get(), a_->get(), b_->get(), out_->get());
  gated_mix_backward(ctx(), s, g_->get(), a_->get(), b_->get(), dout_->get(), da_->get(), db_->get(), dg_->get());
  synchronize(ctx().stream);
  std::vector<double> out(N), da(N), db(N), dg(s.heads, 0.5);
  gated_mix_forward_ref(s, gate.d.data(), a.d.data(), b.d.data(), out.data());
  gated_mix_backward_ref(s, gate.d.data(), a.d.data(), b.d.data(), dout.d.data(), da.data(), db.data(), dg.data());
  EXPECT_LE(rel_l2(out_->host(), out), 1e-6);
  EXPECT_LE(rel_l2(da_->host(), da), 1e-6);
  EXPECT_LE(rel_l2(db_->host(), db), 1e-6);
  EXPECT_LE(rel_l2(dg_->host(), dg), 1e-5);
}

TEST_F(PosopsGpu, Embedding) {
  for (int64_t V : {30, 1000})
    for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 13}, {7, 100}, {2000, 96}}) {
      SCOPED_TRACE(testing::Message() << "V=" << V << " T=" << T << " C=" << C);
      const std::vector<int32_t> ids = test::random_ids(T, V, 4, 1);
      Pair table = random_pair(V * C, 4, 2), dY = random_pair(T * C, 4, 3), dT = random_pair(V * C, 4, 4);
      auto ids_ = up(ids);
      auto table_ = up(table.f), dY_ = up(dY.f), dT_ = up(dT.f), Y_ = up(std::vector<float>(T * C));
      embedding_forward(ctx(), ids_->get(), table_->get(), Y_->get(), T, V, C);
      embedding_backward(ctx(), ids_->get(), dY_->get(), dT_->get(), T, V, C);
      synchronize(ctx().stream);
      std::vector<double> Y(T * C);
      embedding_forward_ref(ids.data(), table.d.data(), Y.data(), T, V, C);
      embedding_backward_ref(ids.data(), dY.d.data(), dT.d.data(), T, V, C);
      EXPECT_EQ(rel_l2(Y_->host(), Y), 0.0);
      EXPECT_LE(rel_l2(dT_->host(), dT.d), 1e-5);
      // The CPU path adds token by token, CUDA in pieces of the sorted ids: equal to rounding.
      std::vector<float> dT_cpu = dT.f;
      const ExecContext host;  // synchronous CPU context: this thread has bound the GPU
      embedding_backward_cpu(host, ids.data(), dY.f.data(), dT_cpu.data(), T, V, C);
      synchronize(host.stream);
      EXPECT_LE(rel_l2(dT_->host(), dT_cpu), 1e-5);
    }
}

TEST_F(PosopsGpu, CrossEntropy) {
  for (int64_t V : {30, 1000})
    for (int64_t T : {1, 7, 300}) {
      SCOPED_TRACE(testing::Message() << "V=" << V << " T=" << T);
      Pair logits = random_pair(T * V, 5, 1, T == 7 ? 1e4 : 3.0);
      std::vector<int32_t> y = test::random_ids(T, V, 5, 2);
      for (int64_t t = 2; t < T; t += 3) y[t] = -1;
      auto y_ = up(y);
      auto l_ = up(logits.f), loss_ = up(std::vector<float>(T)), dl_ = up(std::vector<float>(T * V));
      const CrossEntropySums got = cross_entropy_forward(ctx(), l_->get(), y_->get(), loss_->get(), T, V);
      std::vector<double> losses(T), dl(T * V);
      const CrossEntropySums want = cross_entropy_forward_ref(logits.d.data(), y.data(), losses.data(), T, V);
      const double scale = 1.0 / static_cast<double>(want.count);
      cross_entropy_backward(ctx(), l_->get(), y_->get(), dl_->get(), T, V, static_cast<float>(scale));
      synchronize(ctx().stream);
      cross_entropy_backward_ref(logits.d.data(), y.data(), dl.data(), T, V, scale);
      EXPECT_LE(rel_l2(loss_->host(), losses), 1e-5);
      EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::fabs(want.loss_sum));
      EXPECT_EQ(got.count, want.count);
      EXPECT_EQ(got.correct, want.correct);
      EXPECT_LE(rel_l2(dl_->host(), dl), 1e-5);
      // In place: dlogits over the logits.
      cross_entropy_backward(ctx(), l_->get(), y_->get(), l_->get(), T, V, static_cast<float>(scale));
      synchronize(ctx().stream);
      EXPECT_EQ(l_->host(), dl_->host());
    }
}

TEST_F(PosopsGpu, AdamWAndSumOfSquares) {
  const int64_t n = 100003;
  AdamWConfig cfg;
  cfg.lr = 1e-2f;
  cfg.weight_decay = 0.1f;
  Pair p = random_pair(n, 6, 1), m = random_pair(n, 6, 2, 0.01), v = random_pair(n, 6, 3, 0.0);
  auto p_ = up(p.f), m_ = up(m.f), v_ = up(v.f);
  for (int64_t step = 1; step <= 3; ++step) {
    Pair g = random_pair(n, 6, 10 + step);
    auto g_ = up(g.f);
    adamw_update(ctx(), p_->get(), g_->get(), m_->get(), v_->get(), n, step, cfg, 0.5f);
    adamw_update_ref(p.d.data(), g.d.data(), m.d.data(), v.d.data(), n, step, cfg, 0.5);
    synchronize(ctx().stream);
  }
  EXPECT_LE(rel_l2(p_->host(), p.d), 1e-5);
  EXPECT_LE(rel_l2(m_->host(), m.d), 1e-5);
  EXPECT_LE(rel_l2(v_->host(), v.d), 1e-5);
  const Pair x = random_pair(n, 6, 99);
  auto x_ = up(x.f);
  const double want = sum_of_squares_ref(x.d.data(), n);
  EXPECT_NEAR(sum_of_squares(ctx(), x_->get(), n), want, 1e-12 * want);
  scale_values(ctx(), x_->get(), n, 0.5f);
  synchronize(ctx().stream);
  EXPECT_NEAR(sum_of_squares(ctx(), x_->get(), n), 0.25 * want, 1e-12 * want);
}

}  // namespace
}  // namespace pf
