// CPU sgemm (both backends) against the float64 reference, all transposes,
// shapes that are not multiples of any vector width, and beta accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/gemm/gemm.h"

namespace pf {
namespace {

struct Case { int64_t M, N, K; bool ta, tb; float beta; };

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

void check(GemmBackend backend, const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> A(c.M * c.K), B(c.K * c.N), C(c.M * c.N);
  for (auto* v : {&A, &B, &C})
    for (auto& x : *v) x = u(rng);
  std::vector<double> Ad(A.begin(), A.end()), Bd(B.begin(), B.end()), Cd(C.begin(), C.end());
  const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
  gemm_f32_cpu_with(backend, c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, c.beta, C.data(), c.N);
  gemm_f64_ref(c.ta, c.tb, c.M, c.N, c.K, 0.5, Ad.data(), lda, Bd.data(), ldb, c.beta, Cd.data(), c.N);
  EXPECT_LT(rel_l2(C, Cd), 1e-6) << gemm_backend_name(backend) << " M=" << c.M << " N=" << c.N << " K=" << c.K
                                 << " ta=" << c.ta << " tb=" << c.tb;
}

TEST(Gemm, MatchesFloat64Reference) {
  std::vector<GemmBackend> backends{GemmBackend::OpenBLAS};
  if (cpu_gemm_backend() == GemmBackend::OneDNN) backends.push_back(GemmBackend::OneDNN);
  uint32_t seed = 1;
  for (GemmBackend b : backends)
    for (Case c : {Case{1, 1, 1, false, false, 0.f}, Case{7, 5, 3, false, true, 1.f}, Case{64, 33, 129, true, false, 0.f},
                   Case{100, 257, 65, true, true, 0.25f}, Case{300, 1, 17, false, false, 1.f}})
      check(b, c, seed++);
}

}  // namespace
}  // namespace pf
