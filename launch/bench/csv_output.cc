#include "launch/bench/csv_output.h"

#include "data/replaceable_output.h"

namespace pf::bench {

CsvOutput::CsvOutput(const std::string& path, const std::string& header, bool writer) {
  if (!writer) return;  // (the writer's check alone: ranks probing one file would see each other)
  const std::string first = header.substr(0, header.find('\n'));
  // This header, or an earlier version of it: its first columns, at least
  // two (a benchmark's new columns go at the end).
  const auto same_benchmark = [first](const std::string& p) {
    const std::string line = first_line_of(p);
    return line == first || (line.find(',') != std::string::npos && first.rfind(line + ",", 0) == 0);
  };
  const OutputKind kind{"a CSV of this benchmark (first line '" + first + "', or its first columns)", same_benchmark};
  out_ = std::make_unique<OutputFile>(ReplaceableOutput::file_or_stdout("--csv", path, kind));
  out_->write(header);
}

void CsvOutput::commit() {
  if (out_) out_->commit();
}

}  // namespace pf::bench
