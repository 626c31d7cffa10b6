// Where the sequences of a packed batch lie in this rank's slice (data.mode =
// "packed" or "family", docs/data.md): each sample of L positions holds
// several proteins back to back (and padding after the last), and the slice
// [offset, offset + n) of a sequence-parallel rank may start in the middle of
// one.
//
// A sample's slice is cut into pieces, runs of rows of one sequence:
//   pieces[0].begin == 0; piece i covers [begin_i, begin_{i+1}) (the last up
//   to n); `position` is the position inside its sequence of row `begin` (the
//   sinusoidal position of that row), 0 where the sequence starts at that row,
//   > 0 only for pieces[0] when the sequence began on an earlier rank; `key`
//   names the sequence for the masked-LM draws (the protein's index in its
//   split, so that masks do not depend on how proteins were packed); `joins`
//   marks a sequence that continues the attention state of the sequence
//   before it (a later member of the same family, data.mode = "family"), in
//   this slice or on an earlier rank.
// Positions never cross a piece's sequence. Attention and targets never cross
// a *state segment*: a run of sequences each joining the one before it (a
// family; in packed mode every sequence is its own segment). The causal and
// bidirectional states of model/attention.h restart where a segment starts
// and are combined across ranks by segmented scans (model/attention_packed.cc,
// which runs on state_segments()); the next-token target of a segment's last
// row is none, and the last row of a sequence that another joins predicts
// that sequence's first token.
// An empty layout (no samples) means one sequence per sample: the unpacked modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pf {

// The packed attention (model/attention_packed.cc) runs the pieces of a
// batch in calls over at most this many pieces (all heads of each); the
// planner (model/planner.cc) counts one such call's per-piece states.
constexpr int64_t kPackedPiecesPerCall = 32;

struct SequencePiece {
  int64_t begin = 0;     // first local row
  int64_t position = 0;  // position inside its sequence of that row
  uint64_t key = 0;      // the sequence's masked-LM key
  bool joins = false;    // the sequence continues the state segment of the sequence before it
  // A state segment starts at row `begin` (the segmented scan's flag).
  bool starts() const { return position == 0 && !joins; }
};

struct PackedLayout {
  std::vector<std::vector<SequencePiece>> samples;  // [B] pieces, or empty (unpacked)
  bool empty() const { return samples.empty(); }
  // Rows of piece i of sample b in a slice of n rows.
  int64_t piece_length(int64_t b, size_t i, int64_t n) const;
  // A state segment starts in sample b's slice (the segmented scan's flag).
  bool starts_sequence(int64_t b) const;
  // The state segments as pieces: every piece that joins the one before it
  // in the slice is merged into it (positions and keys are those of the
  // segment's first piece; a first piece that joins a sequence of an earlier
  // rank keeps `joins`). The identity in packed mode.
  PackedLayout state_segments() const;
  // Throws ValueError naming the sample and piece unless the layout describes
  // B samples of n rows as above.
  void check(int64_t B, int64_t n) const;
};

// The one builder of pieces: the sequences of one sample back to back, and
// the pieces of any slice of it (a rank's rows). Training's batches (the
// loader's slice segments), packed scoring and embedding, and a family
// context with its query are all laid out here.
//   sequence k covers sample positions [start(k), start(k + 1)); the first
//   may start before 0 of a slice that begins inside it
//   pieces(begin, end): one piece per sequence that meets [begin, end), rows
//   counted from `begin`; a piece that starts its sequence keeps the
//   sequence's `joins`, one that continues it from an earlier slice does not
class SampleSequences {
 public:
  // The first sequence starts at sample position `first`.
  explicit SampleSequences(int64_t first = 0) : start_{first} {}
  // A sequence of `length` >= 1 positions after the last (ValueError
  // otherwise); `key` as SequencePiece::key; `joins`: it continues the state
  // segment of the sequence before it.
  void add(int64_t length, uint64_t key, bool joins = false);
  int64_t count() const { return static_cast<int64_t>(keys_.size()); }
  int64_t start(int64_t k) const { return start_[static_cast<size_t>(k)]; }
  int64_t end() const { return start_.back(); }
  // The sequence holding sample position x (start(0) <= x < end()).
  int64_t sequence_at(int64_t x) const;
  // The pieces of sample positions [begin, end), which the sequences cover
  // (ValueError otherwise); empty when begin == end.
  std::vector<SequencePiece> pieces(int64_t begin, int64_t end) const;

 private:
  std::vector<int64_t> start_;  // [count + 1]
  std::vector<uint64_t> keys_;
  std::vector<char> joins_;
};

}  // namespace pf
