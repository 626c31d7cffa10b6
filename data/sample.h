// Training samples of sample length L built from a split of protein shards,
// and the slice [begin, end) of a sample that one sequence-parallel rank reads.
//   single: sample s is protein s: its residues, then <end>, then <pad> up to L;
//           a protein with residues + 1 > L is cropped to a window of L tokens
//           starting at a random offset keyed by (seed, epoch, s).
//   concat: all proteins, each followed by <end>, back to back (the stream of
//           ProteinShards); sample s is stream positions [s L, (s + 1) L).
//           floor(stream length / L) samples; the tail shorter than L is unused.
//   packed: whole proteins packed into samples, each attending to itself
//           only (data/packed_samples.h).
//   family: the members of one family back to back, attending to the members
//           before them; several small families may share a sample, each
//           attending to itself only (data/family_contexts.h).
// The lookahead token of a slice is the token at sample position `end`: the
// next token of the same source (the rest of the protein or stream), or <pad>
// where the source ends. The rank holding the last slice uses it as the
// next-token target of its last position; it belongs to the following sample
// in concat mode, so objectives that keep samples independent ignore it there.
#pragma once

#include <cstdint>
#include <string>

#include "data/protein_shards.h"

namespace pf {

enum class SampleMode { Single, Concat, Packed, Family };
// "single" | "concat" | "packed" | "family"; ValueError otherwise. Packed and
// family samples are read through data/packed_samples.h.
SampleMode parse_sample_mode(const std::string& name);
const char* sample_mode_name(SampleMode mode);
// Packed and family samples: several proteins per sample, described by
// segments (Batch.segments) that the model turns into a PackedLayout.
inline bool packs_proteins(SampleMode mode) { return mode == SampleMode::Packed || mode == SampleMode::Family; }

struct SampleInfo {
  int64_t sample = -1;        // sample index in [0, sample_count); -1 for a padding row
  bool valid = false;         // false: a padding row past the end of the epoch (all <pad>)
  int64_t protein = -1;       // single: global protein index; concat: -1
  int64_t source_start = 0;   // single: crop offset in the protein; concat: stream position of the sample
  int64_t source_length = 0;  // single: protein residues; concat: L; packed, family: the sample's useful tokens
};

// Tokens of a sample that are residues or <end> (the rest is padding):
// single min(residues + 1, L), concat L, packed and family the packed tokens; 0 for a
// padding row.
int64_t useful_tokens(SampleMode mode, const SampleInfo& info, int64_t sample_length);

// Samples per epoch (single, concat); DataError naming the files if there is
// not one full sample.
int64_t sample_count(const ProteinShards& shards, SampleMode mode, int64_t sample_length);

// Crop offset of a single-mode sample whose window (residues + <end>) is
// `window` long: uniform in [0, window - L], keyed by (seed, epoch, sample).
int64_t crop_start(uint64_t seed, int64_t epoch, int64_t sample, int64_t window, int64_t sample_length);

// Reads positions [begin, end) of sample `sample` into out[end - begin] and the
// token at position `end` into *lookahead (when not null). Only those
// positions' residues (and the offsets that locate them) are read.
SampleInfo read_sample_slice(ProteinShards& shards, SampleMode mode, int64_t sample_length, uint64_t seed,
                             int64_t epoch, int64_t sample, int64_t begin, int64_t end, uint8_t* out,
                             uint8_t* lookahead);

}  // namespace pf
