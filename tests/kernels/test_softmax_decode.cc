// One query per head against its keys (softmax_attention_decode): the CPU
// kernel against the float64 reference for key counts of 1 to several
// hundred, head sizes 1 to 64 and key blocks with gaps between heads
// (kv_stride > n d); the same output as the last row of a causal forward
// over the same keys (the block the recurrent window ran before); large
// scores stay finite; bad arguments are refused with the numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/errors.h"
#include "tests/kernels/softmax_attention_support.h"
#include "tests/support/error_message.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

using softmax_test::DecodeCase;
using softmax_test::make_case;
using test::cast_vector;
using test::normal_vector;
using test::rel_l2;

std::vector<float> run_cpu(const DecodeCase& c) {
  const auto q = cast_vector<float>(c.q), K = cast_vector<float>(c.K), V = cast_vector<float>(c.V);
  std::vector<float> o(c.q.size(), NAN);
  ExecContext ctx;
  softmax_attention_decode(ctx, c.p, c.stride, q.data(), K.data(), V.data(), o.data());
  return o;
}

std::vector<double> run_ref(const DecodeCase& c) {
  std::vector<double> o(c.q.size());
  softmax_attention_decode_ref(c.p, c.stride, c.q.data(), c.K.data(), c.V.data(), o.data());
  return o;
}

TEST(SoftmaxDecode, CpuMatchesFloat64Reference) {
  uint64_t seed = 40;
  for (int64_t n : {1, 2, 17, 128, 129, 300})
    for (int64_t d : {1, 5, 16, 64})
      for (int64_t gap : {0, 7}) {
        const DecodeCase c = make_case(3, n, d, gap, ++seed);
        EXPECT_LE(rel_l2(run_cpu(c), run_ref(c)), 1e-6) << "n=" << n << " d=" << d << " gap=" << gap;
      }
}

// The reference itself: one key gives its value; equal scores the mean.
TEST(SoftmaxDecode, ReferenceOnKnownCases) {
  DecodeCase c = make_case(1, 1, 4, 0, 1);
  EXPECT_EQ(run_ref(c), c.V);
  c = make_case(1, 3, 2, 0, 2);
  c.K.assign(c.K.size(), 0.5);
  const std::vector<double> o = run_ref(c);
  for (int k = 0; k < 2; ++k) EXPECT_NEAR(o[k], (c.V[k] + c.V[2 + k] + c.V[4 + k]) / 3, 1e-15);
}

// The recurrent window ran the whole causal block and kept its last row.
TEST(SoftmaxDecode, EqualsTheLastRowOfACausalBlock) {
  uint64_t seed = 90;
  for (int64_t n : {1, 9, 64, 200}) {
    const DecodeCase c = make_case(2, n, 16, 0, ++seed);
    SoftmaxAttentionParams bp = c.p;
    bp.causal = true;
    // The block: zero queries but the last, which is q.
    std::vector<float> Q(c.p.heads * n * 16, 0.f), O(Q.size()), lse(c.p.heads * n);
    const auto q = cast_vector<float>(c.q), K = cast_vector<float>(c.K), V = cast_vector<float>(c.V);
    for (int64_t h = 0; h < c.p.heads; ++h)
      std::copy(q.begin() + h * 16, q.begin() + (h + 1) * 16, Q.begin() + (h * n + n - 1) * 16);
    ExecContext ctx;
    softmax_attention_forward(ctx, bp, Q.data(), K.data(), V.data(), O.data(), lse.data());
    const std::vector<float> o = run_cpu(c);
    for (int64_t h = 0; h < c.p.heads; ++h)
      for (int k = 0; k < 16; ++k)
        EXPECT_NEAR(o[h * 16 + k], O[(h * n + n - 1) * 16 + k], 2e-6) << "n=" << n << " head " << h;
  }
}

// Scores in the hundreds: finite, and still the reference.
TEST(SoftmaxDecode, LargeScoresStayFinite) {
  const DecodeCase c = make_case(2, 100, 32, 3, 7, 10.0);
  const std::vector<float> o = run_cpu(c);
  for (float x : o) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(rel_l2(o, run_ref(c)), 1e-5);
}

TEST(SoftmaxDecode, RefusesBadArguments) {
  DecodeCase c = make_case(1, 4, 8, 0, 3);
  const auto q = cast_vector<float>(c.q), K = cast_vector<float>(c.K), V = cast_vector<float>(c.V);
  std::vector<float> o(8);
  ExecContext ctx;
  test::expect_error_naming<ValueError>(
      [&] { softmax_attention_decode(ctx, c.p, 31, q.data(), K.data(), V.data(), o.data()); },
      {"kv_stride 31", "n*d = 32"});
  c.p.n = 0;
  test::expect_error_naming<ValueError>(
      [&] { softmax_attention_decode(ctx, c.p, 32, q.data(), K.data(), V.data(), o.data()); },
      {"at least one key", "n=0"});
  c.p.n = 4;
  c.p.heads = 0;
  softmax_attention_decode(ctx, c.p, 32, q.data(), K.data(), V.data(), o.data());  // nothing to do
}

}  // namespace
}  // namespace pf
