// The exp kernel's trained projections in the fused op: every head its own W
// ([H, m, D], FavorShape::w_heads = H) and the gradient dW
// ([B*H, m, D], accumulated), in the fused CPU kernels and the composition
// in slabs (CUDA's path for exp) against the float64 composite on fresh
// random inputs, with and without the key term; the reference dW against
// central finite differences of the reference loss.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "tests/kernels/favor_reference_loss.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

struct ExpCase {
  int64_t batch, heads, n, d, m, chunk;
};

// m not a multiple of d; chunks that divide no n; n = 1.
const ExpCase kExpCases[] = {
    {2, 3, 29, 8, 20, 6}, {1, 2, 64, 16, 48, 24}, {3, 2, 1, 8, 12, 4}, {1, 1, 300, 16, 64, 64}};

struct ExpProblem {
  FavorAttentionParams p;
  std::vector<float> q, k, v, W, dout;
  std::vector<double> qd, kd, vd, Wd, doutd;
  int64_t batch = 1;
  int64_t size() const { return p.rows() * p.shape.d; }
  int64_t w_size() const { return p.shape.w_heads * p.shape.m * p.shape.d; }
};

// Every head a different projection: an orthogonal draw keyed by the head,
// perturbed as training would.
ExpProblem make(const ExpCase& c, bool causal, bool half_norm, uint64_t seed) {
  ExpProblem pr;
  pr.p = favor_attention_params(c.batch, c.heads, c.n, c.d, c.m, causal, FeatureKernel::Exp, c.chunk);
  pr.batch = c.batch;
  pr.p.shape.w_heads = c.heads;
  pr.p.shape.features.half_norm = half_norm;
  const int64_t size = c.batch * c.heads * c.n * c.d;
  auto f32 = [](const std::vector<double>& x) { return test::cast_vector<float>(x); };
  pr.q = f32(test::normal_vector(size, seed, 1));
  pr.k = f32(test::normal_vector(size, seed, 2));
  pr.v = f32(test::normal_vector(size, seed, 3));
  pr.dout = f32(test::normal_vector(size, seed, 4));
  const std::vector<double> noise = test::normal_vector(c.heads * c.m * c.d, seed, 5, 0.2);
  for (int64_t h = 0; h < c.heads; ++h) {
    const std::vector<float> w = random_projection_f32({c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms},
                                                       {seed, static_cast<uint64_t>(h), 0});
    for (int64_t e = 0; e < c.m * c.d; ++e) pr.W.push_back(w[e] + static_cast<float>(noise[h * c.m * c.d + e]));
  }
  test::reference_sees_float_inputs(pr);
  return pr;
}

// dW [B*H, m, D] summed over the batch: [H, m, D].
template <typename T>
std::vector<double> per_head(const ExpProblem& pr, const std::vector<T>& dW) {
  std::vector<double> out(static_cast<size_t>(pr.w_size()), 0.0);
  for (int64_t b = 0; b < pr.batch; ++b)
    for (int64_t e = 0; e < pr.w_size(); ++e) out[e] += dW[b * pr.w_size() + e];
  return out;
}

TEST(ExpAttention, FusedAndInSlabsMatchReferenceWithTrainedW) {
  uint64_t seed = 500;
  for (const ExpCase& c : kExpCases)
    for (bool causal : {true, false})
      for (bool half_norm : {false, true})
        for (int64_t slab_rows : {int64_t{0}, int64_t{13}}) {
          SCOPED_TRACE(testing::Message()
                       << "B=" << c.batch << " H=" << c.heads << " n=" << c.n << " d=" << c.d << " m=" << c.m
                       << " causal=" << causal << " half_norm=" << half_norm << " slab_rows=" << slab_rows);
          ExpProblem pr = make(c, causal, half_norm, ++seed);
          pr.p.shape.slab_rows = slab_rows;
          const int64_t rows = c.batch * c.heads * c.n, bh = c.batch * c.heads;
          const ExecContext ctx;
          std::vector<float> out(pr.size()), den(rows), rs(rows), total(favor_attention_total_floats(pr.p));
          std::vector<float> dq(pr.size()), dk(pr.size()), dv(pr.size()), dW(bh * c.m * c.d, 0.f);
          float* tot = causal ? nullptr : total.data();
          favor_attention_forward(ctx, pr.p, pr.q.data(), pr.k.data(), pr.v.data(), pr.W.data(), out.data(),
                                  den.data(), rs.data(), tot);
          favor_attention_backward(ctx, pr.p, pr.q.data(), pr.k.data(), pr.v.data(), pr.W.data(), out.data(),
                                   den.data(), rs.data(), tot, pr.dout.data(), dq.data(), dk.data(), dv.data(),
                                   dW.data());
          std::vector<double> out_ref(pr.size()), dq_ref(pr.size()), dk_ref(pr.size()), dv_ref(pr.size()),
              dW_ref(bh * c.m * c.d, 0.0);
          favor_attention_forward_ref(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), pr.Wd.data(), out_ref.data());
          favor_attention_backward_ref(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), pr.Wd.data(),
                                       pr.doutd.data(), dq_ref.data(), dk_ref.data(), dv_ref.data(), dW_ref.data());
          EXPECT_LE(test::rel_l2(out, out_ref), 1e-5);
          EXPECT_LE(test::rel_l2(dv, dv_ref), 1e-5);
          if (c.n == 1) {
            // One position: out = v whatever q, k and W are; dq, dk, dW are rounding.
            EXPECT_LE(test::l2_norm(dW), 1e-5 * test::l2_norm(pr.doutd));
            continue;
          }
          EXPECT_LE(test::rel_l2(dq, dq_ref), 1e-5);
          EXPECT_LE(test::rel_l2(dk, dk_ref), 1e-5);
          EXPECT_LE(test::rel_l2(dW, dW_ref), 1e-5);
          // Each head used its own W: the heads' dW differ.
          if (c.heads > 1) {
            EXPECT_GT(test::rel_l2(dW_ref.data(), dW_ref.data() + c.m * c.d, c.m * c.d), 1e-2);
          }
        }
}

// A W shared by all heads is the FAVOR+ op unchanged: exp with half_norm and
// one projection equals the Softmax kernel bit for bit on the CPU.
TEST(ExpAttention, HalfNormWithOneProjectionIsFavor) {
  const ExpCase c{2, 2, 37, 8, 20, 6};
  for (bool causal : {true, false}) {
    ExpProblem pr = make(c, causal, true, 41);
    pr.p.shape.w_heads = 1;
    FavorAttentionParams favor = pr.p;
    favor.shape.features = default_feature_params(FeatureKernel::Softmax, c.d);
    const int64_t rows = c.batch * c.heads * c.n;
    const ExecContext ctx;
    std::vector<float> a(pr.size()), b(pr.size()), den(rows), rs(rows), total(favor_attention_total_floats(pr.p));
    float* tot = causal ? nullptr : total.data();
    favor_attention_forward(ctx, pr.p, pr.q.data(), pr.k.data(), pr.v.data(), pr.W.data(), a.data(), den.data(),
                            rs.data(), tot);
    favor_attention_forward(ctx, favor, pr.q.data(), pr.k.data(), pr.v.data(), pr.W.data(), b.data(), den.data(),
                            rs.data(), tot);
    EXPECT_EQ(a, b) << "causal=" << causal;
  }
}

// Loss sum(dout * out) of the reference forward with projections W [H, m, D].
double ref_loss(const ExpProblem& pr, const std::vector<double>& W) {
  return test::favor_reference_loss(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), W.data(), pr.doutd.data());
}

TEST(ExpAttention, ReferenceWeightGradientMatchesFiniteDifferences) {
  const ExpCase c{2, 2, 6, 3, 5, 2};
  uint64_t seed = 700;
  for (bool causal : {true, false})
    for (bool half_norm : {false, true}) {
      SCOPED_TRACE(testing::Message() << "causal=" << causal << " half_norm=" << half_norm);
      const ExpProblem pr = make(c, causal, half_norm, ++seed);
      std::vector<double> dq(pr.size()), dk(pr.size()), dv(pr.size()), dW(c.batch * pr.w_size(), 0.0);
      favor_attention_backward_ref(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), pr.Wd.data(), pr.doutd.data(),
                                   dq.data(), dk.data(), dv.data(), dW.data());
      const double h = 1e-6;
      std::vector<double> fd(static_cast<size_t>(pr.w_size()));
      for (int64_t e = 0; e < pr.w_size(); ++e) {
        std::vector<double> W = pr.Wd;
        W[e] = pr.Wd[e] + h;
        const double up = ref_loss(pr, W);
        W[e] = pr.Wd[e] - h;
        fd[e] = (up - ref_loss(pr, W)) / (2 * h);
      }
      EXPECT_LE(test::rel_l2(per_head(pr, dW), fd), 1e-6);
    }
}

}  // namespace
}  // namespace pf
