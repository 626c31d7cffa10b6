// Packing plans: whole proteins placed into samples of L tokens, the layout of
// the packed data mode (each protein's residues and its <end> stay together,
// so a sample holds several proteins back to back and the rest is padding).
//   order   the proteins in a permutation keyed by (seed, epoch), so that
//           every rank computes the same plan and a resumed run the same epoch
//   fit     first fit over a window of open samples: each protein goes into the
//           first open sample (in opening order) with room for it; when none
//           has room and `window` samples are open, the fullest one is closed
//           (ties: the earliest opened) and a new one opened for the protein;
//           at the end the open samples close in opening order. Samples are
//           numbered in closing order.
//   long    a protein with more tokens than L fills a sample of its own,
//           cropped to a window of L tokens starting at crop_start(seed,
//           epoch, protein, tokens, L), as in the single mode
// tokens[p] = residues of protein p + 1 (its <end>). O(proteins x window)
// time and O(proteins) memory for the plan.
#pragma once

#include <cstdint>
#include <vector>

namespace pf {

struct PackedSegment {
  int64_t protein = 0;  // index into the lengths
  int64_t start = 0;    // first token of the protein in the segment: a crop offset at the plan's (seed,
                        // epoch), 0 for whole proteins (PackedSamples draws each epoch's crop again)
  int64_t length = 0;   // tokens of the protein in the segment
  int64_t relatives = 0;  // members of its family context before it (family mode); > 0: it joins the one before
};

struct PackedSample {
  std::vector<PackedSegment> segments;  // in sample order, back to back from position 0
  int64_t used = 0;                     // sum of the segments' lengths (<= L); the rest is padding
};

struct PackingPlan {
  int64_t sample_length = 0;
  std::vector<PackedSample> samples;
  int64_t useful_tokens = 0;  // residues and <end> tokens placed, over every sample
  // Useful tokens over the samples' tokens (samples x L).
  double efficiency() const;
};

// Throws ValueError for L < 1, window < 1 or a protein of fewer than 1 token
// (naming its index).
PackingPlan plan_packing(const std::vector<int64_t>& tokens, int64_t sample_length, uint64_t seed, int64_t epoch,
                         int64_t window = 64);

}  // namespace pf
