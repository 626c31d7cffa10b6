// FASTA and Swiss-Prot readers over gzread: see sequence_reader.h.
#include "data/sequence_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/vocab.h"
#include "runtime/check.h"

namespace pf {

namespace {

constexpr size_t kReadBuffer = 1 << 18;
constexpr size_t kMaxHeader = 64 << 10;  // bytes of a FASTA header line

void require_line_length(size_t bytes, const std::string& path, int64_t line) {
  PF_REQUIRE(DataError, bytes <= LineReader::kMaxLine,
             path << ":" << line << ": a line longer than " << (LineReader::kMaxLine >> 20)
                  << " MiB: not a protein FASTA or Swiss-Prot file (or a damaged one)");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_blank(const std::string& s) {
  for (char c : s)
    if (c != ' ' && c != '\t') return false;
  return true;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return s.substr(a, b - a);
}

std::string first_word(const std::string& s) {
  const size_t end = s.find_first_of(" \t");
  return s.substr(0, end);
}

}  // namespace

std::string describe_byte(unsigned char c) {
  char buf[32];
  if (c >= 0x20 && c < 0x7F) std::snprintf(buf, sizeof(buf), "'%c'", c);
  else std::snprintf(buf, sizeof(buf), "byte 0x%02X", c);
  return buf;
}

int64_t first_invalid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t min = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; }
    else return static_cast<int64_t>(i);
    if (i + len > n) return static_cast<int64_t>(i);
    uint32_t cp = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i + k);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

namespace {

// A header byte that is valid UTF-8 yet no text: a control character other
// than tab (NUL would also cut the stored string short). -1 if none.
int64_t first_control_byte(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7F) return static_cast<int64_t>(i);
  }
  return -1;
}

// "" when the header line is text, else what is wrong and where.
std::string header_text_problem(const std::string& line) {
  const auto at = [&](int64_t i, const char* what) {
    return "column " + std::to_string(i + 1) + ": " + describe_byte(static_cast<unsigned char>(line[i])) + what;
  };
  if (const int64_t bad = first_invalid_utf8(line); bad >= 0) return at(bad, " is not valid UTF-8");
  if (const int64_t bad = first_control_byte(line); bad >= 0) return at(bad, " is a control character, not text");
  return "";
}

}  // namespace

SequenceFormat sequence_format_of(const std::string& path) {
  std::string p = path;  // extensions in any case: Q.FASTA.GZ is FASTA
  std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ends_with(p, ".gz")) p.resize(p.size() - 3);
  for (const char* ext : {".fa", ".fasta", ".faa", ".fas"})
    if (ends_with(p, ext)) return SequenceFormat::Fasta;
  for (const char* ext : {".dat", ".txt", ".sp"})
    if (ends_with(p, ext)) return SequenceFormat::SwissProt;
  PF_REQUIRE(ValueError, false,
             "cannot tell the format of '" << path
                                           << "': expected FASTA (.fa .fasta .faa .fas) or Swiss-Prot (.dat .txt .sp), "
                                              "optionally followed by .gz");
}

void require_sequence_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  PF_REQUIRE(IoError, !ec && std::filesystem::exists(st),
             "cannot open '" << path << "': " << (ec ? ec.message() : std::strerror(ENOENT)));
  PF_REQUIRE(IoError, !std::filesystem::is_directory(st), "'" << path << "' is a folder, not a sequence file");
  PF_REQUIRE(IoError, std::filesystem::is_regular_file(st),
             "'" << path
                 << "' is not a regular file (a pipe or a device): its sequences are read more than once, so save "
                    "them to a file first");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  PF_REQUIRE(IoError, f != nullptr, "cannot open '" << path << "': " << std::strerror(errno));
  std::fclose(f);
}

LineReader::LineReader(const std::string& path) : path_(path), buf_(kReadBuffer) {
  errno = 0;
  file_ = gzopen(path.c_str(), "rb");
  PF_REQUIRE(IoError, file_ != nullptr,
             "cannot open '" << path << "': " << (errno ? std::strerror(errno) : "out of memory"));
  gzbuffer(file_, 1 << 17);
}

LineReader::~LineReader() {
  if (file_) gzclose(file_);
}

bool LineReader::fill() {
  if (eof_) return false;
  const int n = gzread(file_, buf_.data(), static_cast<unsigned>(buf_.size()));
  int err = Z_OK;
  const char* msg = gzerror(file_, &err);
  if (n < 0 || (n == 0 && err != Z_OK && err != Z_STREAM_END)) {
    PF_REQUIRE(IoError, false,
               "cannot read '" << path_ << "' after " << bytes_ << " bytes (line " << line_ + 1
                               << "): " << (err == Z_BUF_ERROR ? "truncated gzip stream (unexpected end of file)"
                                                               : (msg ? msg : "read error")));
  }
  if (n == 0) {
    eof_ = true;
    return false;
  }
  pos_ = 0;
  end_ = static_cast<size_t>(n);
  return true;
}

bool LineReader::next(std::string& line) {
  line.clear();
  bool any = false;
  for (;;) {
    if (pos_ == end_ && !fill()) break;
    any = true;
    const char* start = buf_.data() + pos_;
    const void* nl = std::memchr(start, '\n', end_ - pos_);
    if (nl) {
      const size_t len = static_cast<const char*>(nl) - start;
      require_line_length(line.size() + len, path_, line_ + 1);
      line.append(start, len);
      pos_ += len + 1;
      bytes_ += static_cast<int64_t>(len + 1);
      ++line_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return true;
    }
    line.append(start, end_ - pos_);
    bytes_ += static_cast<int64_t>(end_ - pos_);
    pos_ = end_;
    require_line_length(line.size(), path_, line_ + 1);
  }
  if (!any || line.empty()) return false;
  ++line_;  // last line without a newline
  if (line.back() == '\r') line.pop_back();
  return true;
}

SequenceReader::SequenceReader(const std::string& path, ReaderOptions options)
    : SequenceReader(path, sequence_format_of(path), options) {}

SequenceReader::SequenceReader(const std::string& path, SequenceFormat format, ReaderOptions options)
    : lines_(path), format_(format), options_(options) {}

void SequenceReader::fail(int64_t line, const std::string& what) const {
  PF_REQUIRE(DataError, false, path() << ":" << line << ": " << what);
  throw DataError(what);  // unreachable: PF_REQUIRE(false) throws
}

bool SequenceReader::next(SequenceRecord& rec) {
  const bool got = format_ == SequenceFormat::Fasta ? next_fasta(rec) : next_swissprot(rec);
  if (got) {
    rec.source = &path();
    ++records_;
  } else if (records_ == 0) {
    PF_REQUIRE(DataError, false,
               "'" << path() << "' holds no sequences (empty file, or no "
                   << (format_ == SequenceFormat::Fasta ? "'>' header" : "ID line") << ")");
  }
  return got;
}

// Residues of `line` from byte `from`: spaces and tabs are skipped, one '*'
// may end the sequence (it must be the last residue character of the record).
void SequenceReader::append_residues(const std::string& line, size_t from, SequenceRecord& rec,
                                     int64_t* stop_line) {
  const int64_t ln = lines_.line_number();
  for (size_t i = from; i < line.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c == ' ' || c == '\t') continue;
    if (*stop_line) fail(ln, "residue after the stop '*' of line " + std::to_string(*stop_line) + " in '" + rec.id + "'");
    if (c == '*') {
      *stop_line = ln;
      continue;
    }
    const uint8_t t = Vocab::encode(c, options_.map_unknown_to_x);
    if (t == Vocab::kInvalid) {
      fail(ln, "column " + std::to_string(i + 1) + ": " + describe_byte(c) + " is not an amino-acid letter in '" +
                   rec.id + "'" +
                   ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ? " (use --map-unknown-to-x to read it as X)"
                                                                      : ""));
    }
    rec.tokens.push_back(t);
  }
}

bool SequenceReader::next_fasta(SequenceRecord& rec) {
  rec = SequenceRecord{};
  if (!have_pending_) {
    while (lines_.next(line_)) {
      if (is_blank(line_)) continue;
      if (line_[0] != '>') fail(lines_.line_number(), "text before the first FASTA header ('>'): " +
                                                          describe_byte(static_cast<unsigned char>(line_[0])));
      have_pending_ = true;
      break;
    }
    if (!have_pending_) return false;
  }
  rec.line = lines_.line_number();
  const std::string problem = header_text_problem(line_);
  if (!problem.empty()) fail(rec.line, problem + " in the header");
  // Headers are kept whole in the data file, one per protein.
  if (line_.size() > kMaxHeader)
    fail(rec.line, "a header of " + std::to_string(line_.size()) + " bytes, more than " +
                       std::to_string(kMaxHeader) + " (UniProt's are a few hundred)");
  rec.header = trim(line_.substr(1));
  rec.id = first_word(rec.header);
  if (rec.id.empty()) fail(rec.line, "empty FASTA header");
  int64_t stop_line = 0;
  have_pending_ = false;
  while (lines_.next(line_)) {
    if (!line_.empty() && line_[0] == '>') {
      have_pending_ = true;
      break;
    }
    append_residues(line_, 0, rec, &stop_line);
  }
  if (rec.tokens.empty()) fail(rec.line, "header '" + rec.id + "' has no sequence");
  return true;
}

bool SequenceReader::next_swissprot(SequenceRecord& rec) {
  rec = SequenceRecord{};
  bool in_entry = false, in_seq = false, reviewed = true;
  std::string name, accession, description, organism;
  int64_t stop_line = 0;
  while (lines_.next(line_)) {
    const int64_t ln = lines_.line_number();
    if (!in_entry) {
      if (is_blank(line_)) continue;
      if (line_.compare(0, 2, "ID") != 0) fail(ln, "expected an ID line to start a Swiss-Prot entry");
      in_entry = true;
      rec.line = ln;
      name = first_word(trim(line_.substr(2)));
      if (name.empty()) fail(ln, "ID line without an entry name");
      reviewed = line_.find("Unreviewed;") == std::string::npos;
      continue;
    }
    if (line_.compare(0, 2, "//") == 0) {
      if (!in_seq || rec.tokens.empty()) fail(rec.line, "entry '" + name + "' has no sequence");
      const std::string acc = accession.empty() ? name : accession;
      rec.header = (reviewed ? "sp|" : "tr|") + acc + "|" + name;
      if (!description.empty()) rec.header += " " + description;
      if (!organism.empty()) rec.header += " OS=" + organism;
      rec.id = first_word(rec.header);
      return true;
    }
    if (in_seq) {
      if (line_.compare(0, 2, "  ") != 0) fail(ln, "expected a sequence line or '//' in entry '" + name + "'");
      append_residues(line_, 0, rec, &stop_line);
      continue;
    }
    const std::string problem = header_text_problem(line_);
    if (!problem.empty()) fail(ln, problem);
    const std::string code = line_.substr(0, 2);
    // An entry cut short (no SQ block, no '//') before the next one starts:
    // read on, its name and description would go with the next one's sequence.
    if (code == "ID")
      fail(rec.line, "entry '" + name + "' is not terminated by '//' before the next ID line (line " +
                         std::to_string(ln) + "): a truncated entry?");
    const std::string text = line_.size() > 5 ? trim(line_.substr(5)) : std::string();
    if (code == "AC" && accession.empty()) {
      accession = trim(text.substr(0, text.find(';')));
    } else if (code == "DE" && description.empty()) {
      for (const char* key : {"RecName: Full=", "SubName: Full="}) {
        const size_t at = text.find(key);
        if (at == std::string::npos) continue;
        std::string full = text.substr(at + std::strlen(key));
        full = full.substr(0, full.find(';'));
        description = trim(full.substr(0, full.find(" {")));
        break;
      }
    } else if (code == "OS") {
      organism += (organism.empty() ? "" : " ") + text;
      while (!organism.empty() && organism.back() == '.') organism.pop_back();
    } else if (code == "SQ") {
      in_seq = true;
    }
  }
  if (in_entry) fail(rec.line, "entry '" + name + "' is not terminated by '//' (truncated file?)");
  return false;
}

}  // namespace pf
