// The protein vocabulary: see vocab.h.
#include "data/vocab.h"

#include <cctype>
#include <cstring>

namespace pf {

namespace {

struct EncodeTable {
  std::array<uint8_t, 256> strict{};
  EncodeTable() {
    strict.fill(Vocab::kInvalid);
    for (int i = 0; Vocab::kResidues[i]; ++i) {
      const unsigned char up = static_cast<unsigned char>(Vocab::kResidues[i]);
      strict[up] = static_cast<uint8_t>(Vocab::kFirstResidue + i);
      strict[static_cast<unsigned char>(std::tolower(up))] = static_cast<uint8_t>(Vocab::kFirstResidue + i);
    }
  }
};

const EncodeTable& table() {
  static const EncodeTable t;  // immutable after construction
  return t;
}

}  // namespace

uint8_t Vocab::encode(unsigned char c, bool map_unknown_to_x) {
  const uint8_t t = table().strict[c];
  if (t != kInvalid || !map_unknown_to_x) return t;
  const bool ascii_letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  return ascii_letter ? table().strict[static_cast<unsigned char>('X')] : kInvalid;
}

std::string Vocab::token_text(uint8_t token) {
  switch (token) {
    case kPad: return "<pad>";
    case kEnd: return "<end>";
    case kMask: return "<mask>";
    case kUnk: return "<unk>";
    default: break;
  }
  if (token >= kFirstResidue && token < kSize) return std::string(1, kResidues[token - kFirstResidue]);
  return "<" + std::to_string(token) + ">";
}

char Vocab::residue_letter(uint8_t token) {
  if (token >= kFirstResidue && token < kSize) return kResidues[token - kFirstResidue];
  return '?';
}

std::string Vocab::description() {
  std::string s;
  for (int t = 0; t < kSize; ++t) {
    if (t) s += ',';
    s += token_text(static_cast<uint8_t>(t));
  }
  return s;
}

}  // namespace pf
