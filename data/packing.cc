#include "data/packing.h"

#include <cstddef>

#include "data/permutation.h"
#include "data/sample.h"
#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {

double PackingPlan::efficiency() const {
  const double total = static_cast<double>(samples.size()) * static_cast<double>(sample_length);
  return total > 0 ? static_cast<double>(useful_tokens) / total : 0.0;
}

PackingPlan plan_packing(const std::vector<int64_t>& tokens, int64_t sample_length, uint64_t seed, int64_t epoch,
                         int64_t window) {
  PF_REQUIRE(ValueError, sample_length >= 1, "packing: sample length must be at least 1, got " << sample_length);
  PF_REQUIRE(ValueError, window >= 1, "packing: window must be at least 1, got " << window);
  const int64_t L = sample_length, n = static_cast<int64_t>(tokens.size());
  PackingPlan plan;
  plan.sample_length = L;
  std::vector<PackedSample> open;  // in opening order
  auto close = [&](size_t i) {
    plan.useful_tokens += open[i].used;
    plan.samples.push_back(std::move(open[i]));
    open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
  };
  const KeyedPermutation order(static_cast<uint64_t>(n), mix64(seed ^ 0x9ac4, static_cast<uint64_t>(epoch)));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = static_cast<int64_t>(order(static_cast<uint64_t>(i)));
    const int64_t t = tokens[static_cast<size_t>(p)];
    PF_REQUIRE(ValueError, t >= 1, "packing: protein " << p << " has " << t << " tokens (at least its <end>)");
    if (t >= L) {
      PackedSample own;
      own.segments.push_back({p, t > L ? crop_start(seed, epoch, p, t, L) : 0, L});
      own.used = L;
      plan.useful_tokens += L;
      plan.samples.push_back(std::move(own));
      continue;
    }
    size_t fit = open.size();
    for (size_t j = 0; j < open.size(); ++j)
      if (open[j].used + t <= L) {
        fit = j;
        break;
      }
    if (fit == open.size()) {
      if (static_cast<int64_t>(open.size()) == window) {
        size_t fullest = 0;
        for (size_t j = 1; j < open.size(); ++j)
          if (open[j].used > open[fullest].used) fullest = j;
        close(fullest);
      }
      open.emplace_back();
      fit = open.size() - 1;
    }
    open[fit].segments.push_back({p, 0, t});
    open[fit].used += t;
    if (open[fit].used == L) close(fit);
  }
  while (!open.empty()) close(0);
  return plan;
}

}  // namespace pf
