#include "launch/bench/csv_output.h"

#include "data/replaceable_output.h"

namespace pf::bench {

CsvOutput::CsvOutput(const std::string& path, const std::string& header, bool writer) {
  if (!writer) return;  // (the writer's check alone: ranks probing one file would see each other)
  const std::string first = header.substr(0, header.find('\n'));
  const OutputKind kind{"a CSV of this benchmark (first line '" + first + "')",
                        [first](const std::string& p) { return first_line_of(p) == first; }};
  out_ = std::make_unique<OutputFile>(ReplaceableOutput::file_or_stdout("--csv", path, kind));
  out_->write(header);
}

void CsvOutput::commit() {
  if (out_) out_->commit();
}

}  // namespace pf::bench
