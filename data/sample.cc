// Samples and rank slices: see sample.h.
#include "data/sample.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "data/vocab.h"
#include "runtime/random.h"

namespace pf {

SampleMode parse_sample_mode(const std::string& name) {
  if (name == "single") return SampleMode::Single;
  if (name == "concat") return SampleMode::Concat;
  if (name == "packed") return SampleMode::Packed;
  if (name == "family") return SampleMode::Family;
  PF_REQUIRE(ValueError, false, "unknown sample mode '" << name << "': expected single, concat, packed or family");
}

const char* sample_mode_name(SampleMode mode) {
  switch (mode) {
    case SampleMode::Single: return "single";
    case SampleMode::Concat: return "concat";
    case SampleMode::Packed: return "packed";
    case SampleMode::Family: return "family";
  }
  return "?";
}

int64_t sample_count(const ProteinShards& shards, SampleMode mode, int64_t sample_length) {
  PF_REQUIRE(ValueError, sample_length > 0, "sample length must be positive, got " << sample_length);
  PF_REQUIRE(ValueError, !packs_proteins(mode), "packed and family samples are counted by PackedSamples");
  const int64_t n = mode == SampleMode::Single ? shards.num_proteins() : shards.stream_length() / sample_length;
  if (n < 1) {
    const std::string files = shards.file_list();
    PF_REQUIRE(DataError, false,
               "dataset shorter than one sample: " << shards.num_proteins() << " proteins, "
                                                   << shards.stream_length() << " stream tokens, sample length "
                                                   << sample_length << " (" << sample_mode_name(mode)
                                                   << " mode) in " << files);
  }
  return n;
}

int64_t useful_tokens(SampleMode mode, const SampleInfo& info, int64_t sample_length) {
  if (!info.valid) return 0;
  if (mode == SampleMode::Single) return std::min(info.source_length + 1, sample_length);
  return mode == SampleMode::Concat ? sample_length : info.source_length;
}

int64_t crop_start(uint64_t seed, int64_t epoch, int64_t sample, int64_t window, int64_t sample_length) {
  if (window <= sample_length) return 0;
  const KeyedRandom rng(mix64(seed, 0xC409ull), static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample));
  const Philox4 r = rng.draw(0);
  const uint64_t bits = (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0];
  return static_cast<int64_t>(bits % static_cast<uint64_t>(window - sample_length + 1));
}

SampleInfo read_sample_slice(ProteinShards& shards, SampleMode mode, int64_t sample_length, uint64_t seed,
                             int64_t epoch, int64_t sample, int64_t begin, int64_t end, uint8_t* out,
                             uint8_t* lookahead) {
  PF_REQUIRE(ValueError, !packs_proteins(mode), "packed and family samples are read by PackedSamples");
  PF_REQUIRE(ValueError, 0 <= begin && begin <= end && end <= sample_length,
             "slice [" << begin << ", " << end << ") outside a sample of length " << sample_length);
  const int64_t n = end - begin + (lookahead ? 1 : 0);
  std::vector<uint8_t> buf(static_cast<size_t>(n));
  SampleInfo info;
  info.sample = sample;
  info.valid = true;
  if (mode == SampleMode::Single) {
    const ProteinSpan span = shards.locate(sample);
    const int64_t c = crop_start(seed, epoch, sample, span.length + 1, sample_length);
    shards.read_window(span, c + begin, c + begin + n, buf.data());
    info.protein = sample;
    info.source_start = c;
    info.source_length = span.length;
  } else {
    const int64_t start = sample * sample_length;
    shards.read_stream(start + begin, start + begin + n, buf.data());
    info.source_start = start;
    info.source_length = sample_length;
  }
  if (end > begin) std::memcpy(out, buf.data(), static_cast<size_t>(end - begin));
  if (lookahead) *lookahead = buf.back();
  return info;
}

}  // namespace pf
