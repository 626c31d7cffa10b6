#include "launch/infer/sequence_input.h"

#include <filesystem>

#include "runtime/check.h"

namespace pf {

void check_sequence_inputs(const std::vector<std::string>& files, const std::string& option) {
  PF_REQUIRE(ConfigError, !files.empty(), option << ": no input file given");
  for (const std::string& f : files) {
    PF_REQUIRE(ConfigError, std::filesystem::is_regular_file(f), option << ": no such file '" << f << "'");
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

}  // namespace pf
