// The two small ops the model adds around attention: moving heads between
// token rows and per-head tensors (a permutation: checked element by element
// against its definition, and split/merge are inverses), and the sinusoidal
// encoding of global positions (against the float64 formula, and independent
// of how a sequence is cut into blocks).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/heads/heads.h"
#include "kernels/positional/positional.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

TEST(Heads, SplitMatchesDefinitionAndMergeInverts) {
  const HeadsShape s{3, 2, 7, 4, 5};  // G, B, n, H, D
  std::vector<float> rows(s.numel()), heads(s.numel()), back(s.numel());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  heads_split_cpu(ctx, s, rows.data(), heads.data());
  synchronize(ctx.stream);
  for (int64_t g = 0; g < s.groups; ++g)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.n; ++i)
          for (int64_t d = 0; d < s.dim; ++d) {
            const int64_t e = (((g * s.batch + b) * s.heads + h) * s.n + i) * s.dim + d;
            const int64_t r = (((b * s.n + i) * s.groups + g) * s.heads + h) * s.dim + d;
            ASSERT_EQ(heads[e], rows[r]) << g << " " << b << " " << h << " " << i << " " << d;
          }
  heads_merge_cpu(ctx, s, heads.data(), back.data());
  synchronize(ctx.stream);
  EXPECT_EQ(back, rows);
}

TEST(Positional, MatchesFormulaAndIsSplitInvariant) {
  const int64_t B = 2, n = 12, C = 10;
  std::vector<float> whole(B * n * C, 0.f);
  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  const ExecContext& ctx = res.ctx();
  sinusoidal_add_cpu(ctx, whole.data(), B, n, C, 1000000);
  synchronize(ctx.stream);
  std::vector<double> want(B * n * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < C; ++c) {
        const double angle = (1000000.0 + i) / std::pow(10000.0, static_cast<double>(c - c % 2) / C);
        want[(b * n + i) * C + c] = c % 2 ? std::cos(angle) : std::sin(angle);
      }
  EXPECT_LT(test::rel_l2(whole, want), 1e-6);
  // Two blocks of 5 and 7 positions with their global offsets.
  std::vector<float> first(B * 5 * C, 0.f), second(B * 7 * C, 0.f);
  sinusoidal_add_cpu(ctx, first.data(), B, 5, C, 1000000);
  sinusoidal_add_cpu(ctx, second.data(), B, 7, C, 1000005);
  synchronize(ctx.stream);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < C; ++c) {
        const float got = i < 5 ? first[(b * 5 + i) * C + c] : second[(b * 7 + i - 5) * C + c];
        EXPECT_EQ(got, whole[(b * n + i) * C + c]);
      }
}

}  // namespace
}  // namespace pf
