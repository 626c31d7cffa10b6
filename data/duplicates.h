// Exact duplicates among the records of prepare's inputs, found within a
// memory budget whatever the input size: each record's 128-bit key (FNV-1a
// and an independent word hash of its residues) goes with its record number
// into an external sort (data/external_sort.h); in (key, record) order every
// record after the first of its key repeats an earlier one. The numbers of
// those records, sorted again, form the DropList that the writing passes
// skip. The kept records are exactly those an in-memory set of keys keeps
// (the first of each key in input order).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/external_sort.h"

namespace pf {

struct SequenceKey {
  uint64_t a = 0, b = 0;
  bool operator==(const SequenceKey& o) const { return a == o.a && b == o.b; }
};
SequenceKey sequence_key(const uint8_t* tokens, int64_t n);

// The sorted record numbers to skip: in memory, or in a scratch file when
// they did not fit in the budget.
class DropList {
 public:
  int64_t count() const { return count_; }
  // Answers "is record r dropped?" for r = 0, 1, 2, ... asked in ascending order.
  class Cursor {
   public:
    explicit Cursor(const DropList& list);
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;
    bool dropped(int64_t record);

   private:
    bool advance();
    const DropList& list_;
    FILE* file_ = nullptr;
    std::vector<int64_t> block_;
    size_t pos_ = 0;
    int64_t next_ = -1;  // the next dropped record, -1 after the last
    int64_t memory_pos_ = 0;
  };

 private:
  friend class DuplicateFinder;
  int64_t count_ = 0;
  std::vector<int64_t> memory_;
  std::string file_;  // "" when in memory
};

class DuplicateFinder {
 public:
  // folder(): the scratch folder, asked for on the first spill (the caller
  // removes it); the budget is shared by the key and the drop sorts; poll()
  // is called now and then while finish() sorts (ExternalSorter::set_poll),
  // to stop it by throwing.
  DuplicateFinder(std::function<std::string()> folder, int64_t budget_bytes, std::function<void()> poll = {});
  // Records in input order, numbered 0, 1, 2, ...
  void add(const SequenceKey& key) { keys_.add({key.a, key.b, records_++}); }
  // The drop list (after the last add).
  DropList finish();
  int64_t records() const { return records_; }
  // Sort runs written to disk by both sorts (0: everything in memory).
  int64_t runs_written() const { return runs_written_; }

 private:
  struct KeyedRecord {
    uint64_t a, b;
    int64_t record;
    bool operator<(const KeyedRecord& o) const { return a != o.a ? a < o.a : b != o.b ? b < o.b : record < o.record; }
  };
  std::function<std::string()> folder_;
  int64_t budget_;
  std::function<void()> poll_;
  ExternalSorter<KeyedRecord> keys_;
  int64_t records_ = 0, runs_written_ = 0;
};

}  // namespace pf
