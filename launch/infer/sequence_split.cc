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

int64_t packed_row_minimum(const ModelConfig& cfg, int ranks) {
  return ranks > 1 ? static_cast<int64_t>(ranks) * std::max<int64_t>(1, cfg.window - 1) : 0;
}

void PackedRow::add(const std::vector<int32_t>& sequence, bool joins) {
  PF_REQUIRE(ValueError, !sequence.empty(), "cannot pack an empty sequence");
  sequences.add(static_cast<int64_t>(sequence.size()), static_cast<uint64_t>(count()), joins);
  tokens.insert(tokens.end(), sequence.begin(), sequence.end());
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
