#include "launch/infer/score_output.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "data/h5.h"
#include "runtime/check.h"

namespace pf {

ScoreFormat parse_score_format(const std::string& text) {
  if (text == "tsv") return ScoreFormat::Tsv;
  if (text == "jsonl") return ScoreFormat::Jsonl;
  throw ConfigError("--format must be tsv or jsonl, got '" + text + "'");
}

std::string score_header(ScoreFormat format, bool with_context) {
  if (format != ScoreFormat::Tsv) return "";
  return std::string("id\tlength\tmeasure\tscored\tlog_likelihood\tperplexity") +
         (with_context ? "\talone_scored\talone_log_likelihood\tgain_per_token\n" : "\n");
}

OutputKind score_table_kind() {
  return {"a score table of performer-score", [](const std::string& path) {
            const std::string line = first_line_of(path);
            if (line + "\n" == score_header(ScoreFormat::Tsv, false) ||
                line + "\n" == score_header(ScoreFormat::Tsv, true))
              return true;
            // A JSONL record of exactly the keys format_score_row writes.
            const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
            if (!j.is_object()) return false;
            std::vector<std::string> keys;
            for (const auto& item : j.items()) keys.push_back(item.key());
            std::vector<std::string> alone = {"id", "length", "measure", "scored", "log_likelihood",
                                                    "perplexity"};
            std::vector<std::string> with_context = alone;
            for (const char* k : {"alone_scored", "alone_log_likelihood", "gain_per_token"}) with_context.push_back(k);
            std::sort(keys.begin(), keys.end());
            std::sort(alone.begin(), alone.end());
            std::sort(with_context.begin(), with_context.end());
            return keys == alone || keys == with_context;
          }};
}

OutputKind per_residue_kind() {
  return {"a per-residue file of performer-score",
          [](const std::string& path) { return h5_root_has_attributes(path, {"measure", "checkpoint"}); }};
}

std::string format_score_row(ScoreFormat format, const ScoreRow& r) {
  if (format == ScoreFormat::Jsonl) {
    nlohmann::ordered_json j;
    j["id"] = r.id;
    j["length"] = r.length;
    j["measure"] = r.measure;
    j["scored"] = r.scored;
    j["log_likelihood"] = r.log_likelihood;
    j["perplexity"] = r.perplexity;
    if (r.with_context) {
      j["alone_scored"] = r.alone_scored;
      j["alone_log_likelihood"] = r.alone_log_likelihood;
      j["gain_per_token"] = r.gain_per_token;
    }
    return j.dump() + "\n";
  }
  char buf[256];
  std::snprintf(buf, sizeof(buf), "\t%lld\t%s\t%lld\t%.6f\t%.6f", static_cast<long long>(r.length), r.measure.c_str(),
                static_cast<long long>(r.scored), r.log_likelihood, r.perplexity);
  std::string line = r.id + buf;
  if (r.with_context) {
    std::snprintf(buf, sizeof(buf), "\t%lld\t%.6f\t%.6f", static_cast<long long>(r.alone_scored),
                  r.alone_log_likelihood, r.gain_per_token);
    line += buf;
  }
  return line + "\n";
}

void PerResidueWriter::add(const std::string& id, int64_t length, const std::vector<double>& logprob,
                           const std::vector<double>& top) {
  PF_REQUIRE(ValueError, static_cast<int64_t>(logprob.size()) == length + 1 && top.size() == logprob.size(),
             id << ": " << logprob.size() << " log-probabilities and " << top.size() << " top flags for " << length
                << " residues (want n + 1 of each)");
  ids_.push_back(id);
  lengths_.push_back(length);
  logprob_.insert(logprob_.end(), logprob.begin(), logprob.end());
  top_.insert(top_.end(), top.begin(), top.end());
  offsets_.push_back(static_cast<int64_t>(logprob_.size()));
}

void PerResidueWriter::write_file(const std::string& file, const std::string& measure, const std::string& checkpoint,
                                  const std::string& first_residue) const {
  H5Id f = h5_create_file(file);
  h5_write_strings(f, "ids", ids_);
  h5_write_vector(f, "lengths", lengths_);
  h5_write_vector(f, "offsets", offsets_);
  h5_write_vector(f, "logprob", logprob_);
  h5_write_vector(f, "top", top_);
  h5_write_attr_string(f, "measure", measure);
  h5_write_attr_string(f, "checkpoint", checkpoint);
  if (!first_residue.empty()) h5_write_attr_string(f, "first_residue", first_residue);
  f.close();  // a last write that fails is an error, not a silent short file
}

}  // namespace pf
