// Synthetic protein FASTA for scale tests and benchmarks, drawn from the
// statistics of a real file: lengths resampled from the real lengths,
// residues i.i.d. from the real residue frequencies, and a chosen fraction of
// records repeating the residues of an earlier record exactly (so that the
// duplicate pass has work). Record i depends on (seed, i) alone: O(1) memory
// whatever the count, and the same file for the same arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace pf {

struct ProteinStatistics {
  std::vector<int64_t> lengths;         // residues of each real sequence
  std::vector<double> residue_weights;  // per residue token (data/vocab.h order), any scale
};

// From a FASTA / Swiss-Prot file (plain or .gz); DataError for an empty one.
ProteinStatistics protein_statistics(const std::string& path);

struct SyntheticOptions {
  int64_t count = 0;
  double duplicate_fraction = 0.05;  // records that repeat an earlier one
  uint64_t seed = 0;
  bool gzip = false;  // gzip level 1 when the path ends in .gz
  std::ostream* progress = nullptr;
  // Polled every 1,024 records; when it returns true the write stops with an
  // IoError (the CLI's SIGINT / SIGTERM flag; the caller's temporary file goes).
  std::function<bool()> stop_requested;
};

// Writes the records to `path` (IoError naming it on a failed write);
// returns the residues written.
int64_t write_synthetic_fasta(const ProteinStatistics& stats, const SyntheticOptions& options, const std::string& path);

}  // namespace pf
