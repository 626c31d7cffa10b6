// Result formats of performer-score.
//   tsv:   a header line, then one line per protein:
//          id  length  measure  scored  log_likelihood  perplexity
//   jsonl: one object per protein with the same keys
//          {"id": ..., "length": n, "measure": "log_likelihood", "scored": k,
//           "log_likelihood": L, "perplexity": P}
// measure: "log_likelihood" (causal, exact) or "pseudo_log_likelihood"
// (masked); scored: the number of terms summed in log_likelihood (natural
// log); perplexity = exp(-log_likelihood / scored).
// With a context (--context, launch/infer/context_scoring.h) measure is
// "log_likelihood_given_context" (every residue and <end>: n + 1 terms), and
// three columns follow: alone_scored and alone_log_likelihood (the query
// scored alone, as without --context), and gain_per_token = the mean over the
// terms both score of log P(given context) - log P(alone), in nats.
// Per-residue HDF5 file (--per-residue FILE.h5), readable with h5py:
//   /ids        vlen UTF-8 string [N]
//   /lengths    int64 [N]     residues n_i
//   /offsets    int64 [N + 1] sequence i owns logprob[offsets[i] : offsets[i + 1]]
//   /logprob    float64 [sum (n_i + 1)]  log P of residue 1..n_i, then of <end>;
//               NaN where not scored (the first residue with
//               --first-residue context; <end> for masked models)
//   /top        float64 [sum (n_i + 1)]  1 where the true token has the
//               largest logit (the first of equal ones, as training's
//               accuracy), 0 where another has, NaN where not scored
//   attributes: measure, checkpoint, first_residue (causal models)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/output_path.h"

namespace pf {

enum class ScoreFormat { Tsv, Jsonl };
ScoreFormat parse_score_format(const std::string& text);  // "tsv" | "jsonl"; ConfigError otherwise

struct ScoreRow {
  std::string id;
  int64_t length = 0;
  std::string measure;
  int64_t scored = 0;
  double log_likelihood = 0;
  double perplexity = 0;
  bool with_context = false;  // the three columns below follow
  int64_t alone_scored = 0;
  double alone_log_likelihood = 0;
  double gain_per_token = 0;
};

std::string score_header(ScoreFormat format, bool with_context = false);  // "" for jsonl
std::string format_score_row(ScoreFormat format, const ScoreRow& row);

// What --output and --per-residue write, for the output-path rule
// (data/output_path.h): a score table (TSV or JSONL, either may replace the
// other) and a per-residue HDF5 file.
OutputKind score_table_kind();
OutputKind per_residue_kind();

// Collects the per-residue values of every protein and writes the file at the end.
class PerResidueWriter {
 public:
  void add(const std::string& id, int64_t length, const std::vector<double>& logprob, const std::vector<double>& top);
  // Written to `file` as it is: the temporary file of performer-score's
  // --per-residue output (a ReplaceableOutput), which renames it together
  // with its table.
  void write_file(const std::string& file, const std::string& measure, const std::string& checkpoint,
                  const std::string& first_residue) const;

 private:
  std::vector<std::string> ids_;
  std::vector<int64_t> lengths_, offsets_{0};
  std::vector<double> logprob_, top_;
};

}  // namespace pf
