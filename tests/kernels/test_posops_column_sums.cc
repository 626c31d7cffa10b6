// The CPU column sums (kernels/reduce/column_sums_cpu.h) behind the linear
// bias gradient and LayerNorm's parameter gradients: the same bits as the
// documented order written out sequentially (fp32 over chunks of kRows rows
// in increasing t, the chunks added in increasing order in double), for 1, 2
// and 3 threads, on T below, at and above a chunk and over many chunks; the
// sums add into the outputs; and they agree with float64 sums.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "kernels/reduce/column_sums_cpu.h"
#include "tests/kernels/test_posops_support.h"

namespace pf {
namespace {

using column_sums_cpu::kRows;
using test::Pair;
using test::random_pair;
using test::rel_l2;

// Two sums of [T, C] values a, b: a, and a * b.
struct TwoTerms {
  const float *a, *b;
  int64_t C;
  void operator()(int64_t t, float* const (&acc)[2]) const {
    for (int64_t c = 0; c < C; ++c) {
      acc[0][c] += a[t * C + c];
      acc[1][c] += a[t * C + c] * b[t * C + c];
    }
  }
};

// The documented order, one column at a time.
std::vector<float> sequential(const std::vector<float>& a, const std::vector<float>& b, int64_t T, int64_t C, int k,
                              float start) {
  std::vector<float> out(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    double total = 0.0;
    for (int64_t j = 0; j * kRows < T; ++j) {
      float part = 0.f;
      for (int64_t t = j * kRows; t < T && t < (j + 1) * kRows; ++t)
        part += k == 0 ? a[t * C + c] : a[t * C + c] * b[t * C + c];
      total += part;
    }
    out[c] = start + static_cast<float>(total);
  }
  return out;
}

TEST(ColumnSumsCpu, FixedOrderForAnyThreadCount) {
  uint64_t seed = 5;
  for (int64_t T : {int64_t{1}, kRows - 1, kRows, kRows + 1, 40 * kRows + 3})
    for (int64_t C : {1, 7, 300}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " C=" << C);
      const Pair a = random_pair(T * C, seed, 1, 1.0, 0.5), b = random_pair(T * C, seed, 2);
      ++seed;
      const float start = 0.25f;
      const std::vector<float> want0 = sequential(a.f, b.f, T, C, 0, start);
      const std::vector<float> want1 = sequential(a.f, b.f, T, C, 1, start);
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads);
        omp_set_num_threads(threads);
        std::vector<float> s0(static_cast<size_t>(C), start), s1(static_cast<size_t>(C), start);
        float* const out[2] = {s0.data(), s1.data()};
        column_sums_cpu::add_column_sums<2>(TwoTerms{a.f.data(), b.f.data(), C}, out, T, C);
        EXPECT_EQ(s0, want0);
        EXPECT_EQ(s1, want1);
      }
      omp_set_num_threads(omp_get_num_procs());
      std::vector<double> ref0(static_cast<size_t>(C), start), ref1(static_cast<size_t>(C), start);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
          ref0[c] += a.d[t * C + c];
          ref1[c] += a.d[t * C + c] * b.d[t * C + c];
        }
      EXPECT_LE(rel_l2(want0, ref0), 1e-5);
      EXPECT_LE(rel_l2(want1, ref1), 1e-5);
    }
}

TEST(ColumnSumsCpu, EmptyShapesLeaveOutputs) {
  std::vector<float> s(3, 1.5f);
  float* const out[1] = {s.data()};
  const float x = 2.f;
  auto rows = [&](int64_t, float* const(&acc)[1]) { acc[0][0] += x; };
  column_sums_cpu::add_column_sums<1>(rows, out, 0, 3);
  column_sums_cpu::add_column_sums<1>(rows, out, 4, 0);
  EXPECT_EQ(s, std::vector<float>(3, 1.5f));
}

}  // namespace
}  // namespace pf
