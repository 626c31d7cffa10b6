// Family contexts: see family_contexts.h.
#include "data/family_contexts.h"

#include "data/permutation.h"
#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {

std::vector<std::vector<int64_t>> family_contexts(const SplitClusters& families, const std::vector<int64_t>& tokens,
                                                  int64_t sample_length, uint64_t seed, int64_t epoch,
                                                  Sampling sampling) {
  PF_REQUIRE(ValueError, sample_length >= 1, "family contexts: sample length must be at least 1, got " << sample_length);
  std::vector<std::vector<int64_t>> out;
  for (int64_t f = 0; f < families.count(); ++f) {
    const int64_t size = families.size(f);
    const KeyedPermutation order(static_cast<uint64_t>(size),
                                 mix64(mix64(mix64(seed, 0xFA3111ull), static_cast<uint64_t>(epoch)),
                                       static_cast<uint64_t>(f)));
    std::vector<int64_t> run;
    int64_t used = 0;
    const size_t first = out.size();
    for (int64_t k = 0; k < size; ++k) {
      const int64_t p = families.member(f, static_cast<int64_t>(order(static_cast<uint64_t>(k))));
      const int64_t t = tokens.at(static_cast<size_t>(p));
      PF_REQUIRE(ValueError, t >= 1, "family contexts: protein " << p << " has " << t << " tokens (at least its <end>)");
      if (!run.empty() && (used + t > sample_length || t >= sample_length)) {
        out.push_back(std::move(run));
        run.clear();
        used = 0;
      }
      run.push_back(p);
      used += t;
    }
    if (!run.empty()) out.push_back(std::move(run));
    if (sampling == Sampling::Cluster) out.resize(first + 1);
  }
  return out;
}

}  // namespace pf
