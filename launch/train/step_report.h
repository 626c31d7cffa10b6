// What the training loop reports on rank 0 for a step and for a validation:
// the log line (docs/usage.md#output) and the train.metrics record
// (docs/usage.md: one JSON object a line).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "launch/train/evaluation.h"
#include "model/trainer.h"

namespace pf {

// "42s", "3m07s", "2h05m".
std::string format_duration(double seconds);

struct StepReport {
  int64_t step = 0;   // updates taken after this step
  int64_t steps = 0;  // train.steps
  const StepStats* stats = nullptr;
  double seconds = 0;       // the step's wall time, loader wait included
  double data_seconds = 0;  // the loader wait
  int64_t tokens = 0;       // tokens of the step (dp x batch x sample length)
  int64_t useful = 0;       // residues and <end> tokens among them
  double average_step = 0;  // the smoothed step time that the eta uses
};

// "step 10/100 | loss ... | eta 1m02s\n"
std::string step_log_line(const StepReport& r);
nlohmann::json step_metrics_record(const StepReport& r);

// "validation at step 10 | loss ... | 4096 tokens\n"
std::string validation_log_line(int64_t step, const EvalStats& e);
nlohmann::json validation_metrics_record(int64_t step, const EvalStats& e);

}  // namespace pf
