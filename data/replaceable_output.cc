// One output file from its check to its rename: see replaceable_output.h.
#include "data/replaceable_output.h"

#include <utility>

#include "runtime/check.h"

namespace pf {

ReplaceableOutput::ReplaceableOutput(std::string option, std::string path, const OutputKind& kind,
                                     const std::vector<std::string>& inputs)
    : ReplaceableOutput(std::move(option), std::move(path), kind, inputs, false) {}

ReplaceableOutput ReplaceableOutput::file_or_stdout(std::string option, std::string path, const OutputKind& kind,
                                                    const std::vector<std::string>& inputs) {
  return ReplaceableOutput(std::move(option), std::move(path), kind, inputs, true);
}

ReplaceableOutput::ReplaceableOutput(std::string option, std::string path, const OutputKind& kind,
                                     const std::vector<std::string>& inputs, bool stdout_allowed)
    : option_(std::move(option)), path_(std::move(path)), to_stdout_(path_.empty() || path_ == "-") {
  PF_REQUIRE(ConfigError, stdout_allowed || !to_stdout_,
             option_ << " '" << path_ << "': standard output cannot take " << kind.what << ": name a file");
  was_ = require_replaceable_output(option_, path_, kind, inputs);
}

ReplaceableOutput::~ReplaceableOutput() = default;
ReplaceableOutput::ReplaceableOutput(ReplaceableOutput&&) noexcept = default;
ReplaceableOutput& ReplaceableOutput::operator=(ReplaceableOutput&&) noexcept = default;

const std::string& ReplaceableOutput::temporary_path() {
  PF_REQUIRE(ValueError, !to_stdout_, option_ << ": standard output has no temporary file");
  PF_REQUIRE(ValueError, !committed_, option_ << " '" << path_ << "' was written already");
  if (!tmp_) tmp_ = std::make_unique<TemporaryFile>(path_, was_);
  return tmp_->path();
}

void ReplaceableOutput::commit(Flush flush) {
  temporary_path();  // (an output committed with nothing written is an empty file)
  tmp_->commit(flush);
  tmp_.reset();
  committed_ = true;
}

void ReplaceableOutput::write(const std::function<void(const std::string& tmp)>& fill, Flush flush) {
  try {
    fill(temporary_path());
  } catch (...) {
    tmp_.reset();  // removes it
    throw;
  }
  commit(flush);
}

}  // namespace pf
