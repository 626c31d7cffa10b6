#include "launch/infer/sequence_input.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "runtime/check.h"

namespace pf {
namespace {

// Up to three sequence files directly inside `folder` ("a.fasta, b.fa, ..."),
// "" when it holds none: what the user probably meant to name.
std::string sequence_files_in(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    try {
      sequence_format_of(name);
    } catch (const ValueError&) {
      continue;
    }
    if (it->is_regular_file(ec)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (size_t i = 0; i < names.size() && i < 3; ++i) text += (i ? ", " : "") + names[i];
  return names.size() > 3 ? text + ", ..." : text;
}

// A path that is not a regular file: a folder (say so, and what is in it)
// or nothing at all.
void require_file(const std::string& f, const std::string& option) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(f, ec);
  if (std::filesystem::is_regular_file(st)) return;
  PF_REQUIRE(ConfigError, std::filesystem::exists(st), option << ": no such file '" << f << "'");
  if (std::filesystem::is_directory(st)) {
    const std::string inside = sequence_files_in(f);
    PF_REQUIRE(ConfigError, false,
               option << ": '" << f << "' is a folder; " << option
                      << " takes FASTA / Swiss-Prot sequence files (.fa .fasta .faa .fas .dat .txt .sp, optionally "
                         ".gz)"
                      << (inside.empty() ? std::string(", and this folder holds none")
                                         : ": name the files inside it (" + inside + ")"));
  }
  PF_REQUIRE(
      ConfigError, false,
      option << ": '" << f << "' is not a regular file; " << option << " takes FASTA / Swiss-Prot sequence files");
}

}  // namespace

void check_sequence_inputs(const std::vector<std::string>& files, const std::string& option) {
  PF_REQUIRE(ConfigError, !files.empty(), option << ": no input file given");
  for (const std::string& f : files) {
    require_file(f, option);
    try {
      sequence_format_of(f);
    } catch (const ValueError& e) {
      throw ConfigError(option + " '" + f + "': " + e.what());
    }
  }
}

SequenceSource::SequenceSource(std::vector<std::string> files, ReaderOptions options)
    : files_(std::move(files)), options_(options) {}

bool SequenceSource::next(SequenceRecord& rec) {
  while (true) {
    if (!reader_) {
      if (index_ >= files_.size()) return false;
      reader_ = std::make_unique<SequenceReader>(files_[index_], options_);
    }
    if (reader_->next(rec)) return true;
    reader_.reset();
    ++index_;
  }
}

std::vector<SequenceRecord> read_all_sequences(const std::vector<std::string>& files, ReaderOptions options) {
  SequenceSource source(files, options);
  std::vector<SequenceRecord> out;
  SequenceRecord rec;
  while (source.next(rec)) out.push_back(rec);
  return out;
}

std::string records_phase(const std::string& verb, int64_t done, size_t count, const std::string& first_id) {
  if (count == 1) return "the " + verb + " of record " + std::to_string(done + 1) + " (" + first_id + ")";
  return "the " + verb + " of records " + std::to_string(done + 1) + " to " +
         std::to_string(done + static_cast<int64_t>(count));
}

}  // namespace pf
