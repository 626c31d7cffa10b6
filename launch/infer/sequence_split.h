// One sequence split over the ranks of a sequence group, as the trainer
// splits a sample: rank r of P holds the contiguous positions
// [r N / P, (r + 1) N / P) (balanced; a rank may hold none when N < P), and
// per-position results are summed into rank 0. Several sequences may share
// one split as a packed sample (PackedRow: each attends to itself only, or
// continues the one before it as a family member).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "model/packed_layout.h"
#include "runtime/comm.h"
#include "runtime/memory.h"

namespace pf {

struct PositionBlock {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool holds(int64_t i) const { return i >= begin && i < end; }
};

PositionBlock rank_block(int64_t n, int rank, int ranks);

// The fewest positions a packed forward split over `ranks` ranks must hold:
// one per rank (the packed attention takes no empty rank), and with a local
// window window - 1 per rank, since each rank's window reaches window - 1
// rows back (and forward, masked) into its neighbour's rows only
// (model/attention_window.cc): ranks x max(1, window - 1); 0 on one rank.
// Scoring, embedding and the context's one pass pad a shorter row with a
// filler (<pad> tokens as a packed sequence of its own, which no protein
// attends to; its outputs are dropped), so a protein of any length gives on
// any number of ranks what it gives on one.
int64_t packed_row_minimum(const ModelConfig& cfg, int ranks);

// Sequences back to back as one packed sample: their tokens, and their
// layout by the one builder of pieces (model/packed_layout.h), sequence k
// keyed k.
struct PackedRow {
  std::vector<int32_t> tokens;
  SampleSequences sequences;
  // `joins`: the sequence continues the state of the one before it (a
  // family member after the first).
  void add(const std::vector<int32_t>& sequence, bool joins = false);
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  int64_t count() const { return sequences.count(); }
  int64_t start(int64_t k) const { return sequences.start(k); }  // sequence k is [start(k), start(k + 1))
  int64_t sequence_at(int64_t x) const { return sequences.sequence_at(x); }
  // The pieces of the rank block [blk.begin, blk.end), keyed by sequence index.
  std::vector<SequencePiece> pieces(const PositionBlock& blk) const { return sequences.pieces(blk.begin, blk.end); }
};

// Element-wise sum of `values` over the ranks of `comm`, left in rank 0's
// `values` (the other ranks' are unchanged). Collective over `comm`, through
// its reduce (host values staged through `tracker`'s device on GPUs).
void sum_to_root(std::vector<double>& values, Communicator& comm, MemoryTracker& tracker);

// The memory tracker of the model's context, which stages host values on a
// GPU communicator (ValueError when the context has none).
MemoryTracker& model_tracker(const PerformerModel& model);

}  // namespace pf
