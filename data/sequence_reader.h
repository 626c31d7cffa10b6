// Streaming readers of protein sequence files, plain or gzip-compressed (zlib's
// gzread reads both): FASTA (.fa .fasta .faa, optionally .gz) and Swiss-Prot /
// UniProt flat files (.dat .txt .sp, optionally .gz). One record at a time;
// memory is one record plus a read buffer, whatever the file size.
//   SequenceRecord.tokens: [n] uint8 residue tokens (data/vocab.h), no end token.
// Errors (DataError / IoError) name the file, the line (and column) and the
// offending byte. A header with no sequence is an error, not a skip: silently
// dropping entries would make counts disagree with the source.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/errors.h"

namespace pf {

struct SequenceRecord {
  std::string id;               // first word of the header, e.g. "sp|P15455|CRU4_ARATH"
  std::string header;           // header text without '>': "sp|P15455|CRU4_ARATH <name> OS=<organism> ..."
  std::vector<uint8_t> tokens;  // residue tokens
  int64_t line = 0;             // line of the header (FASTA) or ID line (Swiss-Prot), 1-based
  const std::string* source = nullptr;  // the file read (set by SequenceReader::next; lives with the reader)
};

struct ReaderOptions {
  bool map_unknown_to_x = false;  // unknown ASCII letters become X instead of an error
};

enum class SequenceFormat { Fasta, SwissProt };

// Format from the file name, in any case (a trailing .gz is ignored);
// ValueError naming the file and the accepted extensions otherwise.
SequenceFormat sequence_format_of(const std::string& path);

// An input that can be read more than once: an existing, readable regular
// file (a symbolic link to one is fine). IoError naming the file otherwise
// (missing, unreadable, a folder, a pipe or a device).
void require_sequence_file(const std::string& path);

// Lines of a plain or gzipped text file without their "\n" or "\r\n". A line
// longer than kMaxLine is a DataError naming the file and the line, found
// before the line is held whole (450 times the longest known protein on one
// line: a file of another kind, or damaged).
class LineReader {
 public:
  static constexpr size_t kMaxLine = size_t{16} << 20;
  explicit LineReader(const std::string& path);  // IoError if it cannot be opened
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  bool next(std::string& line);  // false at the end; IoError on a read error or truncated gzip
  int64_t line_number() const { return line_; }  // of the line last returned, 1-based
  int64_t bytes_read() const { return bytes_; }  // uncompressed bytes consumed so far
  const std::string& path() const { return path_; }

 private:
  bool fill();
  std::string path_;
  gzFile file_ = nullptr;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  int64_t line_ = 0, bytes_ = 0;
  bool eof_ = false;
};

class SequenceReader {
 public:
  explicit SequenceReader(const std::string& path, ReaderOptions options = {});
  SequenceReader(const std::string& path, SequenceFormat format, ReaderOptions options = {});
  // Next record; false after the last. DataError for malformed input, including
  // an input with no records at all.
  bool next(SequenceRecord& rec);
  int64_t bytes_read() const { return lines_.bytes_read(); }
  int64_t records_read() const { return records_; }
  const std::string& path() const { return lines_.path(); }

 private:
  bool next_fasta(SequenceRecord& rec);
  bool next_swissprot(SequenceRecord& rec);
  void append_residues(const std::string& line, size_t from, SequenceRecord& rec, int64_t* stop_line);
  [[noreturn]] void fail(int64_t line, const std::string& what) const;

  LineReader lines_;
  SequenceFormat format_;
  ReaderOptions options_;
  std::string line_;
  bool have_pending_ = false;  // FASTA: line_ holds the next header
  int64_t records_ = 0;
};

// Human-readable description of a byte for error messages: "'Q'" or "byte 0xC3".
std::string describe_byte(unsigned char c);
// Offset of the first byte that breaks UTF-8 in s, or -1 if s is valid UTF-8.
int64_t first_invalid_utf8(const std::string& s);

}  // namespace pf
