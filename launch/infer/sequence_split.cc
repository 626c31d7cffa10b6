#include "launch/infer/sequence_split.h"

#include <algorithm>
#include <limits>

#include "runtime/check.h"

namespace pf {

PositionBlock rank_block(int64_t n, int rank, int ranks) {
  PF_REQUIRE(ValueError, ranks >= 1 && rank >= 0 && rank < ranks && n >= 0,
             "rank " << rank << " of " << ranks << " for " << n << " positions");
  return PositionBlock{n * rank / ranks, n * (rank + 1) / ranks};
}

void PackedRow::add(const std::vector<int32_t>& sequence) {
  PF_REQUIRE(ValueError, !sequence.empty(), "cannot pack an empty sequence");
  tokens.insert(tokens.end(), sequence.begin(), sequence.end());
  start.push_back(size());
}

int64_t PackedRow::sequence_at(int64_t x) const {
  return static_cast<int64_t>(std::upper_bound(start.begin(), start.end(), x) - start.begin()) - 1;
}

std::vector<SequencePiece> PackedRow::pieces(const PositionBlock& blk) const {
  std::vector<SequencePiece> p;
  for (int64_t x = blk.begin; x < blk.end;) {
    const int64_t k = sequence_at(x);
    p.push_back({x - blk.begin, x - start[static_cast<size_t>(k)], static_cast<uint64_t>(k)});
    x = start[static_cast<size_t>(k) + 1];
  }
  return p;
}

void sum_to_root(std::vector<double>& values, Communicator& comm, MemoryTracker& tracker) {
  PF_REQUIRE(ValueError, values.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
             values.size() << " values exceed one MPI message");
  reduce_host_values(comm, values.data(), static_cast<int64_t>(values.size()), DType::f64, ReduceOp::Sum, 0, tracker);
}

MemoryTracker& model_tracker(const PerformerModel& model) {
  PF_REQUIRE(ValueError, model.context().tracker != nullptr, "the model's context has no memory tracker");
  return *model.context().tracker;
}

}  // namespace pf
