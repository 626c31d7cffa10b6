#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "data/vocab.h"
#include "runtime/check.h"

namespace pf {

void validate_sampling(const SamplingOptions& o) {
  PF_REQUIRE(ConfigError, std::isfinite(o.temperature) && o.temperature >= 0,
             "--temperature must be >= 0 (0: greedy), got " << o.temperature);
  PF_REQUIRE(ConfigError, o.top_k >= 0, "--top-k must be >= 0 (0: no limit), got " << o.top_k);
  PF_REQUIRE(ConfigError, o.top_p > 0 && o.top_p <= 1, "--top-p must be in (0, 1], got " << o.top_p);
}

int32_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, double u) {
  PF_REQUIRE(ValueError, V >= Vocab::kSize, "logits over " << V << " tokens, the vocabulary has " << Vocab::kSize);
  struct Candidate {
    int32_t id;
    double p;
  };
  std::vector<Candidate> c;
  if (o.allow_end) c.push_back({Vocab::kEnd, 0});
  for (int32_t v = Vocab::kFirstResidue; v < Vocab::kSize; ++v) c.push_back({v, 0});
  auto logit = [&](const Candidate& x) { return static_cast<double>(logits[x.id]); };
  if (o.temperature == 0) {
    const Candidate* best = &c[0];
    for (const Candidate& x : c)
      if (logit(x) > logit(*best) || (logit(x) == logit(*best) && x.id < best->id)) best = &x;
    return best->id;
  }
  double mx = -std::numeric_limits<double>::infinity();
  for (const Candidate& x : c) mx = std::max(mx, logit(x));
  PF_REQUIRE(ValueError, std::isfinite(mx), "logits are not finite: cannot sample");
  for (Candidate& x : c) x.p = std::exp((logit(x) - mx) / o.temperature);
  std::sort(c.begin(), c.end(),
            [](const Candidate& a, const Candidate& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
  double total = 0;
  for (const Candidate& x : c) total += x.p;
  size_t keep = c.size();
  if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
  if (o.top_p < 1) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += c[i].p;
      if (mass >= o.top_p * total) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += c[i].p;
  const double target = u * kept;
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += c[i].p;
    if (cum > target) return c[i].id;
  }
  return c[keep - 1].id;
}

}  // namespace pf
