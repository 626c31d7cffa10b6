// Synthetic protein FASTA: see synthetic_proteins.h.
#include "data/synthetic_proteins.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "data/sequence_reader.h"
#include "data/vocab.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/random.h"

namespace pf {

ProteinStatistics protein_statistics(const std::string& path) {
  ProteinStatistics s;
  s.residue_weights.assign(Vocab::kSize, 0.0);
  SequenceReader reader(path);
  SequenceRecord rec;
  while (reader.next(rec)) {
    s.lengths.push_back(static_cast<int64_t>(rec.tokens.size()));
    for (uint8_t t : rec.tokens) s.residue_weights[t] += 1.0;
  }
  PF_REQUIRE(DataError, !s.lengths.empty(), "'" << path << "' holds no sequence");
  return s;
}

namespace {

// Which record's residues record i carries: itself, or (a fraction of the
// time) an earlier record's, followed back to a fresh one.
int64_t residue_source(uint64_t seed, int64_t i, double duplicate_fraction) {
  while (i > 0) {
    const KeyedRandom r(mix64(seed, 0xD0Bull), static_cast<uint64_t>(i), 0);
    if (r.uniform(0) >= duplicate_fraction) break;
    const Philox4 d = r.draw(1);
    i = static_cast<int64_t>(((static_cast<uint64_t>(d.v[1]) << 32) | d.v[0]) % static_cast<uint64_t>(i));
  }
  return i;
}

}  // namespace

int64_t write_synthetic_fasta(const ProteinStatistics& stats, const SyntheticOptions& o, const std::string& path) {
  PF_REQUIRE(ValueError, !stats.lengths.empty() && stats.residue_weights.size() == Vocab::kSize,
             "synthetic proteins need lengths and one weight per token");
  // Cumulative residue weights over the 20 standard residues and the rest,
  // as 32-bit thresholds.
  std::vector<uint8_t> tokens;
  std::vector<double> cumulative;
  double total = 0;
  for (int t = 0; t < Vocab::kSize; ++t)
    if (stats.residue_weights[static_cast<size_t>(t)] > 0) {
      total += stats.residue_weights[static_cast<size_t>(t)];
      tokens.push_back(static_cast<uint8_t>(t));
      cumulative.push_back(total);
    }
  PF_REQUIRE(ValueError, total > 0, "synthetic proteins: every residue weight is 0");
  std::vector<uint32_t> thresholds;
  for (double c : cumulative)
    thresholds.push_back(static_cast<uint32_t>(std::min(4294967295.0, c / total * 4294967296.0)));
  thresholds.back() = 0xFFFFFFFFu;

  const bool gz = o.gzip || (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0);
  gzFile zf = nullptr;
  FILE* pf = nullptr;
  if (gz)
    zf = gzopen(path.c_str(), "wb1");
  else
    pf = std::fopen(path.c_str(), "wb");
  PF_REQUIRE(IoError, zf || pf, "cannot create '" << path << "': " << std::strerror(errno));
  std::string buf;
  auto close = [&] { return gz ? gzclose(zf) == Z_OK : std::fclose(pf) == 0; };
  auto flush = [&] {
    const bool ok =
        buf.empty() || (gz ? gzwrite(zf, buf.data(), static_cast<unsigned>(buf.size())) == static_cast<int>(buf.size())
                           : std::fwrite(buf.data(), 1, buf.size(), pf) == buf.size());
    const int err = errno;
    buf.clear();
    if (!ok) close();
    PF_REQUIRE(IoError, ok, "cannot write '" << path << "': " << std::strerror(err));
  };
  int64_t residues = 0;
  double last = seconds_now();
  for (int64_t i = 0; i < o.count; ++i) {
    const int64_t src = residue_source(o.seed, i, o.duplicate_fraction);
    const KeyedRandom r(mix64(o.seed, 0x5E9ull), static_cast<uint64_t>(src), 1);
    const Philox4 pick = r.draw(0);
    const int64_t n = stats.lengths[static_cast<size_t>(((static_cast<uint64_t>(pick.v[1]) << 32) | pick.v[0]) %
                                                        stats.lengths.size())];
    buf += ">syn" + std::to_string(i) + " synthetic protein " + std::to_string(i) + "\n";
    for (int64_t k = 0; k < n; k += 4) {
      const Philox4 d = r.draw(static_cast<uint64_t>(k / 4 + 1));
      for (int j = 0; j < 4 && k + j < n; ++j) {
        const size_t t =
            static_cast<size_t>(std::lower_bound(thresholds.begin(), thresholds.end(), d.v[j]) - thresholds.begin());
        buf += Vocab::residue_letter(tokens[std::min(t, tokens.size() - 1)]);
        if ((k + j + 1) % 60 == 0 && k + j + 1 < n) buf += '\n';
      }
    }
    buf += '\n';
    residues += n;
    if (buf.size() > (4u << 20)) flush();
    if ((i & 1023) == 1023 && o.stop_requested && o.stop_requested()) {
      close();
      PF_REQUIRE(IoError, false, "stopped on request after " << i + 1 << " of " << o.count << " sequences");
    }
    if (o.progress && (i & 0xFFFF) == 0 && seconds_now() - last > 5.0) {
      last = seconds_now();
      *o.progress << "  synthetic: " << i << " of " << o.count << " sequences\n" << std::flush;
    }
  }
  flush();
  const bool closed = close();
  PF_REQUIRE(IoError, closed, "cannot write '" << path << "': " << std::strerror(errno));
  return residues;
}

}  // namespace pf
