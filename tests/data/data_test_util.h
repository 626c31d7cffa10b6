// Helpers of the data tests: a temporary directory removed at exit, small
// file writers (plain and gzip), and an independent FASTA reader used as the
// reference (whole-file zlib decompression and a plain '>' / letter scan,
// sharing no code with data/sequence_reader).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace pf::test {

inline const char* kDbFasta = "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz";
inline const char* kQueryFasta = "/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz";
inline const char* kSwissDat = "/usr/share/EMBOSS/test/swiss/seq.dat";

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pf_data_test_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;  // a copy would remove the folder twice
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline void write_gz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

inline std::string read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

struct RefRecord {
  std::string header;
  std::string residues;  // uppercase letters as in the file
};

// Reference FASTA parse: '>' lines start records; all letters of other lines
// are residues (the test inputs hold no '*', digits or unknown letters).
inline std::vector<RefRecord> reference_fasta(const std::string& path) {
  const std::string text = read_all(path);
  std::vector<RefRecord> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line[0] == '>') {
      out.push_back(RefRecord{line.substr(1), ""});
    } else {
      for (char c : line)
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) out.back().residues += static_cast<char>(c & ~0x20);
    }
  }
  return out;
}

// Reference Swiss-Prot parse: one record per "//", residues from lines after SQ.
inline std::vector<RefRecord> reference_swissprot(const std::string& path) {
  const std::string text = read_all(path);
  std::vector<RefRecord> out;
  bool in_seq = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.rfind("ID ", 0) == 0) out.push_back(RefRecord{line, ""});
    else if (line.rfind("SQ ", 0) == 0) in_seq = true;
    else if (line.rfind("//", 0) == 0) in_seq = false;
    else if (in_seq)
      for (char c : line)
        if (c >= 'A' && c <= 'Z') out.back().residues += c;
  }
  return out;
}

}  // namespace pf::test

#include "data/prepare.h"

namespace pf::test {

// The real inputs prepared once per test binary: DB + QUERY (FASTA, gzipped)
// and seq.dat (Swiss-Prot), fractions 0.05 / 0.05, seed 7. A function-local
// static, so its folder (and what tests add to it) is removed at exit; it used
// to be leaked, leaving a folder of about 10 MB in /tmp per run.
struct Prepared {
  TempDir dir;
  std::string path;
  PrepareOptions options;
  PrepareSummary summary;
  Prepared() : path(dir.file("real.h5")) {
    options.inputs = {kDbFasta, kQueryFasta, kSwissDat};
    options.output = path;
    options.val_fraction = 0.05;
    options.test_fraction = 0.05;
    options.seed = 7;
    summary = prepare_dataset(options);
  }
};

inline const Prepared& prepared_real() {
  static const Prepared p;
  return p;
}

}  // namespace pf::test
