// The samples of data.mode = "packed" (docs/data.md): whole proteins, each
// followed by <end>, placed back to back into samples of L tokens by
// plan_packing (data/packing.h) and padded after the last one; a protein with
// more than L tokens fills a sample of its own as a window of L tokens.
// data.mode = "family" packs family contexts (data/family_contexts.h) the same
// way: a context is one unit of the plan, its members back to back, each after
// the first marked as joining the one before it.
//   plan    made once per loader from the split's lengths, keyed by the seed
//           alone, so every epoch has the same samples (and the same number
//           of them); the loader's epoch permutation shuffles their order,
//           and the crop window of a long protein is drawn per epoch by
//           crop_start(seed, epoch, protein, ...) as in the single mode. Each
//           protein attends only to itself (model/packed_layout.h), so which
//           proteins share a sample does not change what is learned from them.
//   slice   positions [begin, end) of a sample, as in data/sample.h, and the
//           segments of the slice: runs of positions of one protein, or of
//           the padding after the last one.
//   cluster sampling (data/cluster_sampling.h): one plan per epoch over the
//           proteins drawn for that epoch, keyed by (seed, epoch).
// The lookahead token of a slice is the next token of the protein that holds
// position end - 1 (its window continues there: a cropped protein's next
// residue), the first token of the next member where that protein ends at
// `end` and the next member joins it, and <pad> where it ends at `end`
// otherwise or position end - 1 is padding: no target reaches across a
// protein boundary, or across a family boundary in family mode.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/packing.h"
#include "data/protein_shards.h"
#include "data/sample.h"

namespace pf {

struct SliceSegment {
  int64_t begin = 0;     // first position of the run, in the slice
  int64_t position = 0;  // position inside its protein (or the padding) of that position; 0 = it starts there
  int64_t protein = -1;    // index of the protein in the split; -1 for padding
  int64_t relatives = 0;   // family mode: members of its family context before the protein
  bool joins = false;      // the run starts a protein that continues the family context of the
                           // protein before it (in this slice or on an earlier rank)
};

class PackedSamples {
 public:
  // Plans the packing of every protein of `shards` (reads their lengths);
  // DataError naming the files when the split has no protein.
  PackedSamples(ProteinShards& shards, int64_t sample_length, uint64_t seed, int64_t window = 64);
  // The plan of epoch `epoch` over `proteins` (indices of the split, each at
  // most once), keyed by (seed, epoch); `tokens` holds residues + 1 of every
  // protein of the split. ValueError when `proteins` is empty.
  PackedSamples(std::shared_ptr<const std::vector<int64_t>> tokens, const std::vector<int64_t>& proteins,
                int64_t sample_length, uint64_t seed, int64_t epoch, int64_t window = 64);
  // The plan of epoch `epoch` over family contexts (each a list of proteins
  // of the split, every protein at most once, a context of several members
  // at most L tokens): the same packing with the contexts as its units.
  // ValueError when `contexts` is empty or a context breaks those rules.
  PackedSamples(std::shared_ptr<const std::vector<int64_t>> tokens, const std::vector<std::vector<int64_t>>& contexts,
                int64_t sample_length, uint64_t seed, int64_t epoch, int64_t window = 64);
  int64_t count() const { return static_cast<int64_t>(plan_.samples.size()); }
  const PackingPlan& plan() const { return plan_; }
  // Tokens (residues + 1) of protein p of the split.
  int64_t protein_tokens(int64_t p) const { return tokens_->at(static_cast<size_t>(p)); }
  // Those of every protein of the split.
  const std::shared_ptr<const std::vector<int64_t>>& tokens() const { return tokens_; }

  // Positions [begin, end) of sample `sample` into out[end - begin], the
  // lookahead into *lookahead (when not null) and the slice's segments into
  // *segments (replaced). info.source_length = the sample's useful tokens.
  // members_alone: the same tokens with every member of a family context on
  // its own (no segment joins, no lookahead into the next member), the
  // baseline of the context gain.
  SampleInfo read_slice(ProteinShards& shards, uint64_t seed, int64_t epoch, int64_t sample, int64_t begin, int64_t end,
                        uint8_t* out, uint8_t* lookahead, std::vector<SliceSegment>* segments,
                        bool members_alone = false) const;

 private:
  int64_t sample_length_;
  std::shared_ptr<const std::vector<int64_t>> tokens_;  // residues + 1 per protein of the split
  PackingPlan plan_;
};

}  // namespace pf
