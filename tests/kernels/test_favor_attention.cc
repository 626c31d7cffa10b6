// FAVOR+ attention composite (features + linear attention, forward and
// backward): the CPU composite against the float64 composite reference on fresh
// random inputs (n in {1, 7, 64, 1000}, chunks that do not divide n, causal and
// bidirectional, FAVOR+ and relu features), a finite-difference check of the
// reference backward with respect to q, k and v, strict causality of the
// composite, finite results at large input norms, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "runtime/errors.h"
#include "tests/kernels/favor_reference_loss.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

struct Case {
  int64_t batch, heads, n, d, m, chunk;
};

// n in {1, 7, 64, 1000}; chunk divides none of the n > 1.
const Case kCases[] = {{1, 2, 1, 16, 32, 4}, {2, 1, 7, 8, 16, 3}, {1, 3, 64, 16, 48, 24}, {1, 1, 1000, 16, 32, 96}};
const FeatureKernel kKernels[] = {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu};

struct Problem {
  FavorAttentionParams p;
  std::vector<float> q, k, v, W, dout;
  std::vector<double> qd, kd, vd, Wd, doutd;
  int64_t size() const { return p.rows() * p.shape.d; }
};

Problem make_problem(const Case& c, bool causal, FeatureKernel kernel, uint64_t seed, double qk_scale = 1.0) {
  Problem pr;
  pr.p = favor_attention_params(c.batch, c.heads, c.n, c.d, c.m, causal, kernel, c.chunk);
  const int64_t size = c.batch * c.heads * c.n * c.d;
  pr.qd = test::normal_vector(size, seed, 1, qk_scale);
  pr.kd = test::normal_vector(size, seed, 2, qk_scale);
  pr.vd = test::normal_vector(size, seed, 3);
  pr.doutd = test::normal_vector(size, seed, 4);
  pr.W = random_projection_f32({c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
  pr.q = test::cast_vector<float>(pr.qd);
  pr.k = test::cast_vector<float>(pr.kd);
  pr.v = test::cast_vector<float>(pr.vd);
  pr.dout = test::cast_vector<float>(pr.doutd);
  test::reference_sees_float_inputs(pr);
  return pr;
}

struct Result {
  std::vector<float> out, den, row_scale, total, dq, dk, dv;
};

Result run_cpu(const Problem& pr, bool with_backward) {
  const ExecContext ctx;
  const FavorAttentionParams& p = pr.p;
  const int64_t rows = p.rows();
  Result r;
  r.out.resize(pr.size());
  r.den.resize(rows);
  r.row_scale.resize(rows);
  r.total.resize(favor_attention_total_floats(p));
  float* total = p.causal ? nullptr : r.total.data();
  favor_attention_forward(ctx, p, pr.q.data(), pr.k.data(), pr.v.data(), pr.W.data(), r.out.data(), r.den.data(),
                          r.row_scale.data(), total);
  if (with_backward) {
    r.dq.resize(pr.size());
    r.dk.resize(pr.size());
    r.dv.resize(pr.size());
    favor_attention_backward(ctx, p, pr.q.data(), pr.k.data(), pr.v.data(), pr.W.data(), r.out.data(), r.den.data(),
                             r.row_scale.data(), total, pr.dout.data(), r.dq.data(), r.dk.data(), r.dv.data());
  }
  return r;
}

template <typename T>
double l2(const std::vector<T>& x) {
  double s = 0;
  for (T e : x) s += static_cast<double>(e) * e;
  return std::sqrt(s);
}

bool all_finite(const std::vector<float>& x) {
  for (float e : x)
    if (!std::isfinite(e)) return false;
  return true;
}

TEST(FavorAttention, CpuMatchesReference) {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    for (bool causal : {true, false}) {
      for (FeatureKernel kernel : kKernels) {
        SCOPED_TRACE(testing::Message() << "B=" << c.batch << " H=" << c.heads << " n=" << c.n << " d=" << c.d
                                        << " m=" << c.m << " chunk=" << c.chunk << " causal=" << causal
                                        << " kernel=" << feature_kernel_name(kernel));
        const Problem pr = make_problem(c, causal, kernel, ++seed);
        const Result r = run_cpu(pr, true);
        std::vector<double> out(pr.size()), dq(pr.size()), dk(pr.size()), dv(pr.size());
        favor_attention_forward_ref(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), pr.Wd.data(), out.data());
        favor_attention_backward_ref(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), pr.Wd.data(), pr.doutd.data(),
                                     dq.data(), dk.data(), dv.data());
        EXPECT_LE(test::rel_l2(r.out, out), 1e-5);
        EXPECT_LE(test::rel_l2(r.dv, dv), 1e-5);
        if (c.n > 1) {
          EXPECT_LE(test::rel_l2(r.dq, dq), 1e-5);
          EXPECT_LE(test::rel_l2(r.dk, dk), 1e-5);
        } else {
          // One position: out = v whatever q and k are, so dq = dk = 0 exactly
          // and only rounding is left; compare against the size of dout.
          const double g = l2(pr.doutd);
          EXPECT_LE(l2(dq) + l2(dk), 1e-12 * g);
          EXPECT_LE(l2(r.dq) + l2(r.dk), 1e-5 * g);
        }
      }
    }
  }
}

// Loss sum(dout * out) of the reference forward.
double ref_loss(const Problem& pr, const std::vector<double>& q, const std::vector<double>& k,
                const std::vector<double>& v) {
  return test::favor_reference_loss(pr.p, q.data(), k.data(), v.data(), pr.Wd.data(), pr.doutd.data());
}

TEST(FavorAttention, ReferenceBackwardMatchesFiniteDifferences) {
  const Case c{1, 2, 5, 3, 4, 2};
  uint64_t seed = 300;
  for (bool causal : {true, false}) {
    for (FeatureKernel kernel : kKernels) {
      SCOPED_TRACE(testing::Message() << "causal=" << causal << " kernel=" << feature_kernel_name(kernel));
      const Problem pr = make_problem(c, causal, kernel, ++seed);
      std::vector<double> dq(pr.size()), dk(pr.size()), dv(pr.size());
      favor_attention_backward_ref(pr.p, pr.qd.data(), pr.kd.data(), pr.vd.data(), pr.Wd.data(), pr.doutd.data(),
                                   dq.data(), dk.data(), dv.data());
      const double h = 1e-6;
      for (int which = 0; which < 3; ++which) {
        const std::vector<double>& grad = which == 0 ? dq : which == 1 ? dk : dv;
        std::vector<double> fd(pr.size());
        for (int64_t i = 0; i < pr.size(); ++i) {
          std::vector<double> q = pr.qd, k = pr.kd, v = pr.vd;
          std::vector<double>& x = which == 0 ? q : which == 1 ? k : v;
          const double x0 = x[i];
          x[i] = x0 + h;
          const double lp = ref_loss(pr, q, k, v);
          x[i] = x0 - h;
          const double lm = ref_loss(pr, q, k, v);
          fd[i] = (lp - lm) / (2 * h);
        }
        EXPECT_LE(test::rel_l2(grad, fd), 1e-6) << "gradient "
                                                << "qkv"[which];
      }
    }
  }
}

TEST(FavorAttention, CausalOutputIgnoresLaterPositions) {
  const Case c{1, 2, 50, 16, 32, 16};
  const int64_t cut = 20;  // rows <= cut must not see positions > cut (mid-chunk)
  for (FeatureKernel kernel : kKernels) {
    SCOPED_TRACE(feature_kernel_name(kernel));
    const Problem base = make_problem(c, true, kernel, 400);
    const Result r0 = run_cpu(base, false);
    for (int which = 0; which < 3; ++which) {
      Problem pr = base;
      std::vector<float>& x = which == 0 ? pr.q : which == 1 ? pr.k : pr.v;
      const auto noise = test::normal_vector(pr.size(), 401 + which, 9, 3.0);
      for (int64_t h = 0; h < c.batch * c.heads; ++h)
        for (int64_t i = cut + 1; i < c.n; ++i)
          for (int64_t e = 0; e < c.d; ++e)
            x[(h * c.n + i) * c.d + e] += static_cast<float>(noise[(h * c.n + i) * c.d + e]);
      const Result r1 = run_cpu(pr, false);
      double later_change = 0;
      for (int64_t h = 0; h < c.batch * c.heads; ++h) {
        for (int64_t i = 0; i < c.n; ++i) {
          for (int64_t e = 0; e < c.d; ++e) {
            const int64_t at = (h * c.n + i) * c.d + e;
            if (i <= cut)
              ASSERT_EQ(r0.out[at], r1.out[at]) << "tensor "
                                                << "qkv"[which] << " head " << h << " row " << i;
            else
              later_change += std::fabs(r0.out[at] - r1.out[at]);
          }
        }
      }
      EXPECT_GT(later_change, 0.0) << "perturbing "
                                   << "qkv"[which] << " changed nothing";
    }
  }
}

TEST(FavorAttention, LargeNormsStayFinite) {
  const Case c{1, 2, 200, 32, 64, 48};
  uint64_t seed = 500;
  for (bool causal : {true, false}) {
    for (FeatureKernel kernel : kKernels) {
      SCOPED_TRACE(testing::Message() << "causal=" << causal << " kernel=" << feature_kernel_name(kernel));
      const Problem pr = make_problem(c, causal, kernel, ++seed, 10.0);
      const Result r = run_cpu(pr, true);
      EXPECT_TRUE(all_finite(r.out));
      EXPECT_TRUE(all_finite(r.dq));
      EXPECT_TRUE(all_finite(r.dk));
      EXPECT_TRUE(all_finite(r.dv));
      // Every output row is a convex combination of value rows.
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t e = 0; e < c.d; ++e) {
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t j = 0; j < c.n; ++j) {
            lo = std::fmin(lo, pr.v[(h * c.n + j) * c.d + e]);
            hi = std::fmax(hi, pr.v[(h * c.n + j) * c.d + e]);
          }
          for (int64_t i = 0; i < c.n; ++i) {
            const float o = r.out[(h * c.n + i) * c.d + e];
            EXPECT_TRUE(o >= lo - 1e-4f && o <= hi + 1e-4f) << "head " << h << " row " << i << " col " << e;
          }
        }
    }
  }
}

TEST(FavorAttention, RejectsBadArguments) {
  EXPECT_THROW(favor_attention_params(1, 1, 8, 0, 16, true, FeatureKernel::Softmax), ValueError);
  FavorAttentionParams p = favor_attention_params(1, 1, 8, 4, 16, true, FeatureKernel::Softmax);
  p.shape.m = 0;
  EXPECT_THROW(favor_attention_check(p), ValueError);
  p = favor_attention_params(1, 1, 8, 4, 16, true, FeatureKernel::Softmax, 0);
  EXPECT_THROW(favor_attention_check(p), ValueError);
  // Feature slices are multiples of 16 features.
  p = favor_attention_params(1, 1, 8, 4, 40, true, FeatureKernel::Softmax);
  for (int64_t slice : {-16, 8, 24}) {
    p.shape.feature_slice = slice;
    try {
      favor_attention_check(p);
      ADD_FAILURE() << "feature_slice " << slice << " was taken";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("feature_slice must be 0 or a positive multiple of 16"), std::string::npos)
          << e.what();
    }
  }
  p.shape.feature_slice = 32;
  EXPECT_NO_THROW(favor_attention_check(p));
  p = favor_attention_params(1, 1, 8, 4, 16, false, FeatureKernel::Softmax);
  std::vector<float> x(32), W(64), out(32), den(8), rs(8);
  EXPECT_THROW(favor_attention_forward(ExecContext{}, p, x.data(), x.data(), x.data(), W.data(), out.data(), den.data(),
                                       rs.data(), nullptr),
               ValueError);
}

}  // namespace
}  // namespace pf
