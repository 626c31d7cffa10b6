// Protein sequences for the inference tools, read with the readers of
// performer-data (data/sequence_reader.h): FASTA or Swiss-Prot by extension,
// plain or gzipped, with the same error rules (an unknown letter, an empty
// file, a header without a sequence: DataError naming the file and line).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sequence_reader.h"

namespace pf {

// Each file exists, is a regular file and has a known extension; ConfigError
// (exit status 2) naming `option` and the file otherwise (a folder is called a
// folder, with the sequence files it holds, not a missing file).
void check_sequence_inputs(const std::vector<std::string>& files, const std::string& option);

// The records of several files, in order, one at a time.
class SequenceSource {
 public:
  SequenceSource(std::vector<std::string> files, ReaderOptions options);
  bool next(SequenceRecord& rec);  // false after the last record of the last file

 private:
  std::vector<std::string> files_;
  ReaderOptions options_;
  size_t index_ = 0;
  std::unique_ptr<SequenceReader> reader_;
};

// Every record of `files` (for prompts, which are few).
std::vector<SequenceRecord> read_all_sequences(const std::vector<std::string>& files, ReaderOptions options);

// The watchdog's phase (runtime/watchdog.h) while a tool works on `count`
// records after the first `done`, named in its report should another rank
// stall this one: "the scoring of record 12 (ID)", "the scoring of records
// 12 to 15" (the report says "during" before it).
std::string records_phase(const std::string& verb, int64_t done, size_t count, const std::string& first_id);

}  // namespace pf
