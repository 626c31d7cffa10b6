// Identifiers that name more than one kept sequence among prepare's records.
// Exact repeats are dropped before (data/duplicates.h), so two kept records
// with one identifier always hold different sequences: a score, embedding or
// --families row keyed by that identifier cannot tell them apart. Found
// within a memory budget whatever the input size: each kept record's 128-bit
// identifier key (the two hashes of data/duplicates.h) goes with its index
// into an external sort (data/external_sort.h) of 24-byte records, as small
// as the duplicate sort's; equal keys are adjacent in (key, index) order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/external_sort.h"

namespace pf {

struct IdConflicts {
  int64_t names = 0;      // identifiers held by two or more kept sequences
  int64_t sequences = 0;  // kept sequences whose identifier another kept sequence holds
  // The earliest reuse in input order (names > 0): the kept sequence with the
  // smallest index whose identifier an earlier kept sequence holds (second),
  // and the first kept sequence holding it (first).
  int64_t first_index = -1, second_index = -1;
};

class IdConflictFinder {
 public:
  // folder(): the scratch folder, asked for on the first spill (the caller
  // removes it); poll() as in DuplicateFinder.
  IdConflictFinder(std::function<std::string()> folder, int64_t budget_bytes, std::function<void()> poll = {});
  // Kept records in input order, index counting them from 0.
  void add(const std::string& id, int64_t index);
  IdConflicts finish();
  // Sort runs written to disk (0: everything in memory).
  int64_t runs_written() const { return keys_.runs_written(); }

 private:
  struct IdRecord {
    uint64_t a, b;
    int64_t index;
    bool operator<(const IdRecord& o) const { return a != o.a ? a < o.a : b != o.b ? b < o.b : index < o.index; }
  };
  ExternalSorter<IdRecord> keys_;
};

}  // namespace pf
