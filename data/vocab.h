// The protein vocabulary: token ids stored as uint8 in the data files.
//   0 <pad>  1 <end> (separator / end of protein)  2 <mask>  3 <unk>
//   4..23  the 20 canonical amino acids A C D E F G H I K L M N P Q R S T V W Y
//   24 B  25 Z  26 X  27 U  28 O
// Lowercase letters map like uppercase. Readers strip one trailing '*' (stop)
// and, when asked, map any other ASCII letter to X; every other byte is an
// error reported by the reader with file, line, column and the byte.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace pf {

struct Vocab {
  static constexpr uint8_t kPad = 0;
  static constexpr uint8_t kEnd = 1;
  static constexpr uint8_t kMask = 2;
  static constexpr uint8_t kUnk = 3;
  static constexpr uint8_t kFirstResidue = 4;
  static constexpr int kSize = 29;
  static constexpr uint8_t kInvalid = 0xFF;  // encode() result for a byte that is not a residue
  // Residue letters in token order, starting at kFirstResidue.
  static constexpr const char* kResidues = "ACDEFGHIKLMNPQRSTVWYBZXUO";

  // Token of a residue byte (either case), or kInvalid. With map_unknown_to_x,
  // other ASCII letters give the token of X.
  static uint8_t encode(unsigned char c, bool map_unknown_to_x = false);
  // Display text of a token: "<pad>", "<end>", "<mask>", "<unk>" or the letter.
  static std::string token_text(uint8_t token);
  // The letter of a residue token ('?' for special tokens): for decoding sequences.
  static char residue_letter(uint8_t token);
  // "<pad>,<end>,<mask>,<unk>,A,C,...,O": token i is the i-th comma-separated entry.
  // Stored in every data file so readers can refuse a different vocabulary.
  static std::string description();
};

}  // namespace pf
