// Identifiers shared by kept sequences: see id_conflicts.h.
#include "data/id_conflicts.h"

#include "data/duplicates.h"

namespace pf {

IdConflictFinder::IdConflictFinder(std::function<std::string()> folder, int64_t budget_bytes,
                                   std::function<void()> poll)
    : keys_(std::move(folder), "ids", budget_bytes) {
  keys_.set_poll(std::move(poll));
}

void IdConflictFinder::add(const std::string& id, int64_t index) {
  const SequenceKey k = sequence_key(reinterpret_cast<const uint8_t*>(id.data()), static_cast<int64_t>(id.size()));
  keys_.add({k.a, k.b, index});
}

IdConflicts IdConflictFinder::finish() {
  keys_.finish();
  IdConflicts c;
  IdRecord r{}, head{};
  int64_t group = 0;  // records of the current key so far
  while (keys_.next(r)) {
    if (group > 0 && r.a == head.a && r.b == head.b) {
      // In (key, index) order the second record of a key is the earliest
      // reuse of that identifier.
      if (group == 1) {
        ++c.names;
        c.sequences += 2;
        if (c.second_index < 0 || r.index < c.second_index) {
          c.first_index = head.index;
          c.second_index = r.index;
        }
      } else {
        ++c.sequences;
      }
      ++group;
      continue;
    }
    head = r;
    group = 1;
  }
  return c;
}

}  // namespace pf
