#include "launch/train/step_report.h"

#include <cmath>
#include <cstdio>

#include "runtime/memory.h"

namespace pf {

std::string format_duration(double s) {
  char buf[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

namespace {
double useful_fraction(const StepReport& r) { return static_cast<double>(r.useful) / static_cast<double>(r.tokens); }
}  // namespace

std::string step_log_line(const StepReport& r) {
  const StepStats& st = *r.stats;
  char line[320];
  std::snprintf(line, sizeof line,
                "step %lld/%lld | loss %.4f | ppl %.3f | acc %.4f | %.0f tok/s | useful %.3f | lr %.3g | peak %s | "
                "eta %s\n",
                static_cast<long long>(r.step), static_cast<long long>(r.steps), st.loss, std::exp(st.loss),
                st.accuracy, r.tokens / r.seconds, useful_fraction(r), st.lr, format_bytes(st.peak_bytes).c_str(),
                format_duration(r.average_step * static_cast<double>(r.steps - r.step)).c_str());
  return line;
}

nlohmann::json step_metrics_record(const StepReport& r) {
  const StepStats& st = *r.stats;
  return nlohmann::json{{"step", r.step},
                        {"loss", st.loss},
                        {"ppl", std::exp(st.loss)},
                        {"accuracy", st.accuracy},
                        {"tokens_per_s", r.tokens / r.seconds},
                        {"useful_fraction", useful_fraction(r)},
                        {"useful_tokens_per_s", static_cast<double>(r.useful) / r.seconds},
                        {"lr", st.lr},
                        {"grad_norm", st.grad_norm},
                        {"loss_scale", st.loss_scale},
                        {"skipped", st.skipped},
                        {"no_targets", st.no_targets},
                        {"peak_bytes", st.peak_bytes},
                        {"seconds", r.seconds},
                        {"time",
                         {{"data", r.data_seconds},
                          {"attention", st.model.attention},
                          {"scan", st.model.scan},
                          {"scan_exposed", st.model.scan_exposed},
                          {"other", st.model.other},
                          {"allreduce", st.allreduce},
                          {"allreduce_exposed", st.allreduce_exposed},
                          {"optimizer", st.optimizer}}}};
}

std::string validation_log_line(int64_t step, const EvalStats& e) {
  char line[256];
  std::snprintf(line, sizeof line, "validation at step %lld | loss %.4f | ppl %.3f | acc %.4f | %lld tokens\n",
                static_cast<long long>(step), e.loss(), e.perplexity(), e.accuracy(), static_cast<long long>(e.tokens));
  return line;
}

nlohmann::json validation_metrics_record(int64_t step, const EvalStats& e) {
  return nlohmann::json{{"eval",
                         {{"step", step},
                          {"loss", e.loss()},
                          {"ppl", e.perplexity()},
                          {"accuracy", e.accuracy()},
                          {"tokens", e.tokens}}}};
}

}  // namespace pf
