// Linear attention, CPU fp32 against the float64 reference: causal and
// bidirectional forward and backward over every n, d, m class (n not a multiple
// of the chunk, m not a multiple of d, n = 1), the reference backward against
// central differences of the reference forward, chunk-size invariance, and
// extreme key log-scales; the storage-typed overloads (f32 on the CPU equals
// the fp32 entry points; f16/bf16 refused there).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "runtime/errors.h"
#include "runtime/memory.h"
#include "tests/kernels/test_linear_attention_support.h"

namespace pf {
namespace {

using test::LinAttnProblem;
using test::rel_l2;

struct Case {
  int64_t heads, n, m, d, chunk;
};

// Every n, d, m value appears; chunks that do and do not divide n.
const Case kCases[] = {
    {2, 1, 16, 16, 64},      {2, 7, 64, 32, 4},      {3, 64, 100, 64, 16},
    {1, 1000, 256, 64, 128}, {2, 1000, 64, 16, 200}, {1, 4099, 16, 16, 100},
};

std::string describe(const LinAttnProblem& p, bool causal) {
  const auto& s = p.s;
  return std::string(causal ? "causal" : "bidirectional") + " heads=" + std::to_string(s.heads) +
         " n=" + std::to_string(s.n) + " m=" + std::to_string(s.m) + " d=" + std::to_string(s.d) +
         " C=" + std::to_string(s.chunk);
}

void expect_forward_matches_reference(const LinAttnProblem& p, bool causal, double tol) {
  const auto f = test::forward_cpu(p, causal);
  const auto r = test::reference(p, causal, false);
  EXPECT_LE(rel_l2(f.o, r.o), tol) << "o " << describe(p, causal);
}

// The gradients with respect to phi contain G_i . V'_j = dO_i . (v_j - o_i) / den_i,
// which cancels when one key dominates row i (then o_i ~ v_j): the function itself
// is ill-conditioned there, so these comparisons use key log-scales of comparable
// size. With n = 1 those gradients vanish identically (o_0 = v_0) and are checked
// to be tiny instead.
void expect_backward_matches_reference(const LinAttnProblem& p, bool causal, double tol) {
  const auto f = test::forward_cpu(p, causal);
  const auto b = test::backward_cpu(p, f, causal);
  const auto r = test::reference(p, causal, true);
  const std::string tag = describe(p, causal);
  EXPECT_LE(rel_l2(f.o, r.o), tol) << "o " << tag;
  EXPECT_LE(rel_l2(b.dv, r.dv), tol) << "d_v " << tag;
  if (p.s.n == 1) {
    for (float x : b.dq) EXPECT_LE(std::abs(x), 1e-5) << "d_phi_q " << tag;
    for (float x : b.dk) EXPECT_LE(std::abs(x), 1e-5) << "d_phi_k " << tag;
    return;
  }
  EXPECT_LE(rel_l2(b.dq, r.dq), tol) << "d_phi_q " << tag;
  EXPECT_LE(rel_l2(b.dk, r.dk), tol) << "d_phi_k " << tag;
}

TEST(LinearAttention, CausalMatchesReference) {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    expect_forward_matches_reference(test::make_problem(c.heads, c.n, c.m, c.d, c.chunk, seed++, 20.f), true, 1e-5);
    expect_backward_matches_reference(test::make_problem(c.heads, c.n, c.m, c.d, c.chunk, seed++, 2.f), true, 1e-5);
  }
}

TEST(LinearAttention, BidirectionalMatchesReference) {
  uint64_t seed = 200;
  for (const Case& c : kCases) {
    expect_forward_matches_reference(test::make_problem(c.heads, c.n, c.m, c.d, c.chunk, seed++, 20.f), false, 1e-5);
    expect_backward_matches_reference(test::make_problem(c.heads, c.n, c.m, c.d, c.chunk, seed++, 2.f), false, 1e-5);
  }
}

// Key log-scales up to +-80: exp(c) spans 1e-35..1e35, beyond fp32 if formed
// directly. The outputs stay finite and still match the reference.
TEST(LinearAttention, ExtremeLogScalesStayFiniteAndAccurate) {
  for (bool causal : {true, false}) {
    auto p = test::make_problem(2, 300, 64, 16, 32, 300, 80.f);
    // Head 1: a huge key first, then tiny ones (forces rescaling of every later chunk),
    // and alternating extremes.
    for (int64_t j = 0; j < p.s.n; ++j) p.ck[p.s.n + j] = j == 0 ? 80.f : (j % 2 ? -80.f : 79.f - 0.5f * j);
    const auto f = test::forward_cpu(p, causal);
    const auto b = test::backward_cpu(p, f, causal);
    for (const auto* x : {&f.o, &f.den, &f.row_scale, &b.dq, &b.dk, &b.dv})
      for (float e : *x) ASSERT_TRUE(std::isfinite(e)) << (causal ? "causal" : "bidirectional");
    expect_backward_matches_reference(p, causal, 1e-5);
  }
}

// float64 reference backward (to 1e-6) and the fp32 CPU backward (chunk 4, not
// dividing n; to 1e-4) vs central differences of the reference forward,
// loss = sum(d_o * o), every input entry.
void check_finite_differences(bool causal) {
  const int64_t n = 9, m = 5, d = 3;
  auto p = test::make_problem(1, n, m, d, 4, causal ? 400 : 401, 3.f);
  std::vector<double> q(p.pq.begin(), p.pq.end()), k(p.pk.begin(), p.pk.end()), c(p.ck.begin(), p.ck.end()),
      v(p.v.begin(), p.v.end()), g(p.d_o.begin(), p.d_o.end());
  std::vector<double> dq(n * m), dk(n * m), dv(n * d), o(n * d);
  linear_attention_backward_ref(causal, n, m, d, q.data(), k.data(), c.data(), v.data(), g.data(), dq.data(), dk.data(),
                                dv.data());
  const auto cpu = test::backward_cpu(p, test::forward_cpu(p, causal), causal);
  auto loss = [&] {
    linear_attention_forward_ref(causal, n, m, d, q.data(), k.data(), c.data(), v.data(), o.data());
    double l = 0;
    for (int64_t i = 0; i < n * d; ++i) l += g[i] * o[i];
    return l;
  };
  auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const std::vector<float>& got,
                   const char* name) {
    for (size_t i = 0; i < x.size(); ++i) {
      const double h = 1e-6 * std::max(1.0, std::abs(x[i])), keep = x[i];
      x[i] = keep + h;
      const double up = loss();
      x[i] = keep - h;
      const double down = loss();
      x[i] = keep;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 1e-6 * std::max(1.0, std::abs(fd))) << name << "[" << i << "] causal=" << causal;
      EXPECT_NEAR(got[i], fd, 1e-4 * std::max(1.0, std::abs(fd)))
          << "cpu " << name << "[" << i << "] causal=" << causal;
    }
  };
  check(q, dq, cpu.dq, "d_phi_q");
  check(k, dk, cpu.dk, "d_phi_k");
  check(v, dv, cpu.dv, "d_v");
}

TEST(LinearAttention, BackwardMatchesFiniteDifferencesCausal) { check_finite_differences(true); }
TEST(LinearAttention, BackwardMatchesFiniteDifferencesBidirectional) { check_finite_differences(false); }

TEST(LinearAttention, ChunkSizeInvariance) {
  auto p = test::make_problem(2, 333, 64, 32, 64, 500);
  const auto f0 = test::forward_cpu(p, true);
  const auto b0 = test::backward_cpu(p, f0, true);
  for (int64_t chunk : {1, 5, 32, 128, 333, 1000}) {
    p.s.chunk = chunk;
    const auto f = test::forward_cpu(p, true);
    const auto b = test::backward_cpu(p, f, true);
    EXPECT_LE(rel_l2(f.o, f0.o), 1e-6) << "chunk " << chunk;
    EXPECT_EQ(f.row_scale, f0.row_scale) << "chunk " << chunk;
    EXPECT_LE(rel_l2(f.total, f0.total), 1e-6) << "chunk " << chunk;
    EXPECT_LE(rel_l2(b.dq, b0.dq), 1e-6) << "chunk " << chunk;
    EXPECT_LE(rel_l2(b.dk, b0.dk), 1e-6) << "chunk " << chunk;
    EXPECT_LE(rel_l2(b.dv, b0.dv), 1e-6) << "chunk " << chunk;
    EXPECT_LE(rel_l2(b.total, b0.total), 1e-6) << "chunk " << chunk;
  }
}

TEST(LinearAttention, TemporariesAreRecordedInTheTracker) {
  const auto p = test::make_problem(2, 100, 16, 8, 32, 3);
  MemoryTracker tracker(Device::cpu(), 1024);
  ExecContext ctx;
  ctx.tracker = &tracker;
  std::vector<float> y(2 * 100 * 9), L(2 * 100), T(2 * p.s.state_size());
  auto run = [&] {
    causal_linear_attention_forward_local(ctx, p.s, p.pq.data(), p.pk.data(), p.ck.data(), p.v.data(), y.data(),
                                          L.data(), T.data(), nullptr);
  };
  EXPECT_THROW(run(), MemoryError);  // the workspace does not fit a 1 KiB cap
  tracker.set_cap(0);
  run();
  EXPECT_GT(tracker.stats().peak_bytes, 1024);
  EXPECT_EQ(tracker.stats().current_bytes, 0);
}

// The fused segmented combine: flag then state per head; out = later where
// later's flag is set, else the state combine (the same bits as
// linear_attention_state_combine), flag = or; with out aliasing either input;
// and its identity (cleared states) is neutral on both sides.
TEST(LinearAttention, SegmentedStateCombineIsTheSegmentedFormOfTheStateCombine) {
  const ExecContext ctx;
  const int64_t heads = 4, m = 6, d = 3, ss = 1 + m * (d + 1), g = ss + 1;
  auto e = test::cast_vector<float>(test::normal_vector(heads * g, 11));
  auto l = test::cast_vector<float>(test::normal_vector(heads * g, 12));
  const float flags_e[heads] = {0, 1, 0, 1}, flags_l[heads] = {0, 0, 1, 1};
  for (int64_t h = 0; h < heads; ++h) {
    e[h * g] = flags_e[h];
    l[h * g] = flags_l[h];
    e[h * g + 1] *= 20.f;
    l[h * g + 1] *= 20.f;
  }
  std::vector<float> want(heads * g);
  for (int64_t h = 0; h < heads; ++h) {
    float* w = want.data() + h * g;
    if (flags_l[h] != 0)
      std::copy(l.begin() + h * g + 1, l.begin() + (h + 1) * g, w + 1);
    else
      linear_attention_state_combine(ctx, 1, m, d, e.data() + h * g + 1, l.data() + h * g + 1, w + 1);
    w[0] = (flags_e[h] != 0 || flags_l[h] != 0) ? 1.f : 0.f;
  }
  std::vector<float> out(heads * g);
  linear_attention_segmented_state_combine(ctx, heads, m, d, e.data(), l.data(), out.data());
  EXPECT_EQ(out, want);
  std::vector<float> into_e = e, into_l = l;
  linear_attention_segmented_state_combine(ctx, heads, m, d, into_e.data(), l.data(), into_e.data());
  linear_attention_segmented_state_combine(ctx, heads, m, d, e.data(), into_l.data(), into_l.data());
  EXPECT_EQ(into_e, want);
  EXPECT_EQ(into_l, want);
  std::vector<float> id(heads * g), left(heads * g), right(heads * g);
  linear_attention_segmented_state_clear(ctx, heads, m, d, id.data());
  for (int64_t h = 0; h < heads; ++h) {
    EXPECT_EQ(id[h * g], 0.f);
    EXPECT_EQ(id[h * g + 1], kEmptyLogScale);
  }
  linear_attention_segmented_state_combine(ctx, heads, m, d, id.data(), e.data(), left.data());
  linear_attention_segmented_state_combine(ctx, heads, m, d, e.data(), id.data(), right.data());
  EXPECT_LE(rel_l2(left, e), 1e-7);
  EXPECT_LE(rel_l2(right, e), 1e-7);
  EXPECT_THROW(linear_attention_segmented_state_combine(ctx, 1, 0, d, e.data(), e.data(), e.data()), ValueError);
}

TEST(LinearAttention, RejectsBadShapes) {
  const ExecContext ctx;
  std::vector<float> x(64);
  EXPECT_THROW(linear_attention_state_clear(ctx, LinAttnShape{1, 4, 0, 4, 2}, x.data()), ValueError);
  EXPECT_THROW(linear_attention_state_combine(ctx, 1, 4, -1, x.data(), x.data(), x.data()), ValueError);
  EXPECT_THROW(linear_attention_normalize(ctx, LinAttnShape{1, 4, 4, 4, 0}, x.data(), x.data(), x.data()), ValueError);
  EXPECT_THROW(causal_linear_attention_forward_local(ctx, LinAttnShape{1, 4, 4, 4, 2}, x.data(), nullptr, x.data(),
                                                     x.data(), x.data(), x.data(), x.data(), nullptr),
               ValueError);
}

// The f32 storage overloads are the fp32 entry points: same bits, causal and
// bidirectional, including the accumulating add_prefix / add_suffix forms.
TEST(LinearAttention, F32StorageOverloadsMatchFp32) {
  const auto p = test::make_problem(2, 77, 16, 8, 16, 31);
  const LinAttnShape& s = p.s;
  const ExecContext ctx;
  const DType t = DType::f32;
  for (bool causal : {true, false}) {
    const auto f = test::forward_cpu(p, causal);
    const auto b = test::backward_cpu(p, f, causal);
    std::vector<float> y(f.y.size()), L(f.row_scale.size()), T(f.total.size()), o(f.o.size()), den(f.den.size()),
        dq(b.dq.size()), dk(b.dk.size()), dv(b.dv.size()), U(b.total.size());
    if (causal) {
      causal_linear_attention_forward_local(ctx, s, t, p.pq.data(), p.pk.data(), p.ck.data(), p.v.data(), y.data(),
                                            L.data(), T.data(), nullptr);
      linear_attention_normalize(ctx, s, t, y.data(), o.data(), den.data());
      causal_linear_attention_backward_local(ctx, s, t, p.pq.data(), p.pk.data(), p.ck.data(), p.v.data(), o.data(),
                                             den.data(), L.data(), p.d_o.data(), dq.data(), dk.data(), dv.data(),
                                             U.data(), nullptr, nullptr);
    } else {
      bidirectional_linear_attention_local_state(ctx, s, t, p.pk.data(), p.ck.data(), p.v.data(), T.data());
      bidirectional_linear_attention_forward_finish(ctx, s, t, p.pq.data(), T.data(), y.data(), L.data());
      linear_attention_normalize(ctx, s, t, y.data(), o.data(), den.data());
      bidirectional_linear_attention_backward_local(ctx, s, t, p.pq.data(), o.data(), den.data(), L.data(),
                                                    p.d_o.data(), T.data(), dq.data(), U.data());
      bidirectional_linear_attention_backward_finish(ctx, s, t, p.pk.data(), p.ck.data(), p.v.data(), U.data(),
                                                     dk.data(), dv.data());
    }
    EXPECT_EQ(o, f.o) << causal;
    EXPECT_EQ(den, f.den) << causal;
    EXPECT_EQ(T, f.total) << causal;
    EXPECT_EQ(dq, b.dq) << causal;
    EXPECT_EQ(dk, b.dk) << causal;
    EXPECT_EQ(dv, b.dv) << causal;
    // The accumulating forms, fp32 and f32-storage side by side.
    std::vector<float> y1 = f.y, L1 = f.row_scale, dq1 = b.dq, dk1 = b.dk, dv1 = b.dv;
    std::vector<float> y2 = f.y, L2 = f.row_scale, dq2 = b.dq, dk2 = b.dk, dv2 = b.dv;
    linear_attention_add_prefix(ctx, s, p.pq.data(), f.total.data(), y1.data(), L1.data());
    linear_attention_add_prefix(ctx, s, t, p.pq.data(), f.total.data(), y2.data(), L2.data());
    linear_attention_backward_add_prefix(ctx, s, f.o.data(), f.den.data(), f.row_scale.data(), p.d_o.data(),
                                         f.total.data(), dq1.data());
    linear_attention_backward_add_prefix(ctx, s, t, f.o.data(), f.den.data(), f.row_scale.data(), p.d_o.data(),
                                         f.total.data(), dq2.data());
    linear_attention_backward_add_suffix(ctx, s, p.pk.data(), p.ck.data(), p.v.data(), b.total.data(), dk1.data(),
                                         dv1.data());
    linear_attention_backward_add_suffix(ctx, s, t, p.pk.data(), p.ck.data(), p.v.data(), b.total.data(), dk2.data(),
                                         dv2.data());
    EXPECT_EQ(y1, y2);
    EXPECT_EQ(L1, L2);
    EXPECT_EQ(dq1, dq2);
    EXPECT_EQ(dk1, dk2);
    EXPECT_EQ(dv1, dv2);
  }
}

// f16/bf16 storage is CUDA-only: every storage overload refuses it on the CPU
// with a ValueError naming the dtype, before touching any buffer.
TEST(LinearAttention, CpuRefusesHalfStorage) {
  const auto p = test::make_problem(1, 5, 4, 4, 2, 32);
  const LinAttnShape& s = p.s;
  const ExecContext ctx;
  std::vector<float> buf(static_cast<size_t>(s.state_size() + s.n * (s.m + s.d + 1)), 0.f);
  float* x = buf.data();
  for (DType t : {DType::f16, DType::bf16}) {
    const std::string name = dtype_name(t);
    const std::vector<std::function<void()>> calls = {
        [&] { causal_linear_attention_forward_local(ctx, s, t, x, x, x, x, x, x, x, nullptr); },
        [&] { linear_attention_add_prefix(ctx, s, t, x, x, x, x); },
        [&] { linear_attention_normalize(ctx, s, t, x, x, x); },
        [&] {
          causal_linear_attention_backward_local(ctx, s, t, x, x, x, x, x, x, x, x, x, x, x, x, nullptr, nullptr);
        },
        [&] { linear_attention_backward_add_prefix(ctx, s, t, x, x, x, x, x, x); },
        [&] { linear_attention_backward_add_suffix(ctx, s, t, x, x, x, x, x, x); },
        [&] { bidirectional_linear_attention_local_state(ctx, s, t, x, x, x, x); },
        [&] { bidirectional_linear_attention_forward_finish(ctx, s, t, x, x, x, x); },
        [&] { bidirectional_linear_attention_backward_local(ctx, s, t, x, x, x, x, x, x, x, x); },
        [&] { bidirectional_linear_attention_backward_finish(ctx, s, t, x, x, x, x, x, x); },
    };
    for (size_t i = 0; i < calls.size(); ++i) {
      try {
        calls[i]();
        ADD_FAILURE() << "overload " << i << " accepted " << name << " on the CPU";
      } catch (const ValueError& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << i << ": " << e.what();
      }
    }
    for (float e : buf) ASSERT_EQ(e, 0.f) << name;
  }
}

}  // namespace
}  // namespace pf
