#include "data/empty_split_check.h"

#include <sstream>

#include "data/schema.h"
#include "runtime/check.h"

namespace pf {
namespace {

// What the fractions give split s, for a message: the option(s) and the share.
std::string fraction_text(const PrepareOptions& opt, int s, int64_t wanted, int64_t eligible) {
  std::ostringstream os;
  if (s == 0)
    os << "--val-fraction " << opt.val_fraction << " and --test-fraction " << opt.test_fraction << " leave it "
       << 1.0 - opt.val_fraction - opt.test_fraction;
  else
    os << (s == 1 ? "--val-fraction " : "--test-fraction ") << (s == 1 ? opt.val_fraction : opt.test_fraction)
       << " asks for " << wanted;
  os << " of the " << eligible << " sequences";
  return os.str();
}

}  // namespace

// Whole families go to one split, so one family larger than the held-out
// targets can leave a split empty that the fractions gave sequences to: with
// one 100,000-member family among ten small ones, /test takes it whole and
// /train keeps nothing. A file without /train (or /valid) fails only later,
// in training, or silently, so it is refused here, before anything is
// written, naming the family that took the sequences; a split the fractions
// leave empty (0 for it, or a sum of 1 for /train) is what the user asked for.
void require_wanted_splits(const PrepareOptions& opt, const ClusterSplitInput& in, const ClusterSplitResult& r,
                           const std::vector<int64_t>& cluster, const std::vector<uint8_t>& ood,
                           const std::vector<int64_t>& representative, const FamilyTable* table,
                           const std::function<std::string(int64_t)>& id_of) {
  std::vector<int64_t> size(representative.size(), 0);  // members that take part in the split
  int64_t eligible = 0;
  for (size_t i = 0; i < cluster.size(); ++i)
    if (!ood[i]) {
      ++size[static_cast<size_t>(cluster[i])];
      ++eligible;
    }
  const int64_t held[3] = {eligible - r.held_out[1] - r.held_out[2], r.held_out[1], r.held_out[2]};
  const int64_t wanted[3] = {eligible - in.targets[1] - in.targets[2], in.targets[1], in.targets[2]};
  for (int s = 0; s < 3; ++s) {
    if (held[s] > 0 || wanted[s] <= 0) continue;
    size_t biggest = 0;  // the largest family of the other splits: it took what split s was to hold
    for (size_t c = 0; c < size.size(); ++c)
      if (r.split[c] != s && size[c] > size[biggest]) biggest = c;
    const std::string rep = id_of(representative[biggest]);
    const char* unit = table ? "family" : "cluster";
    std::ostringstream what;
    if (table)
      what << "--families '" << table->path() << "': ";
    else
      what << "--cluster-identity " << opt.cluster.identity << ": ";
    what << "/" << kSplitNames[s] << " would be empty, although " << fraction_text(opt, s, wanted[s], eligible) << ": ";
    if (table)
      what << "family '" << *table->family_of(rep) << "' (representative '" << rep << "', ";
    else
      what << "the cluster of '" << rep << "' (";
    what << size[biggest] << " of the " << eligible << " sequences) went whole to /" << kSplitNames[r.split[biggest]]
         << ", since a " << unit << " is never split between /train, /valid and /test";
    if (r.clusters_moved > 0)
      what << ", and the leak purge moved " << r.clusters_moved << " held-out " << unit << "(s) (" << r.sequences_moved
           << " sequences) to /train";
    what << ". ";
    if (table)
      what << "Split family '" << *table->family_of(rep) << "' into smaller families in '" << table->path() << "'";
    else
      what << "A higher --cluster-identity makes smaller clusters";
    if (eligible - size[biggest] >= in.targets[1] + in.targets[2])
      what << ", try another --seed (it orders the " << unit << "s)";
    if (s == 0)
      what << ", or give fractions that sum to 1 if no /train is wanted";
    else
      what << ", or give " << (s == 1 ? "--val-fraction" : "--test-fraction") << " 0 if no /" << kSplitNames[s]
           << " is wanted";
    throw ValueError(what.str());
  }
}


}  // namespace pf
