// performer-bench generate: generation tokens/s and peak memory on one rank,
// by the recurrent form (model/recurrent.h: one token per step, carried
// attention states) against the naive way (the parallel forward recomputed
// over the whole prefix for every new token).
//   performer-bench generate --preset small|medium|paper [--lengths 1000,10000,100000]
//       [--full-up-to N] [--tail-tokens K] [--naive-tokens K] [--naive-lengths 1000,10000]
//       [--set model.key=value ...] [--csv FILE]
// The model is randomly initialised (its weights do not change the time);
// tokens are drawn by model/sampling.h among the residues only, so
// every run generates exactly the asked length.
// Recurrent: timed over the whole length up to --full-up-to; a longer length
// L is timed over its last --tail-tokens tokens, started from an empty state
// at position L - tail (the per-token work does not depend on the position
// or the state's values), and its time is EXTRAPOLATED as L x that rate.
// Peak = the memory tracker's peak (parameters, their gradient buffer,
// projections, states and scratch).
// Naive: generating L tokens costs sum_{t=1..L} f(t), f(t) = the time of
// one parallel forward over t tokens. The first K tokens are generated the
// naive way and timed (measured); f is timed at --naive-lengths, and the time
// for L tokens is EXTRAPOLATED as the sum of f(t) for t = 1..L, with f
// piecewise linear through the measured points (the K naive tokens' mean
// forward at t = K / 2), constant below the first and continued with the last
// slope above the last (a linear-attention forward is linear in t).
// The naive peak at L is the tracker's peak of the forward at L when L is
// among --naive-lengths, else linear through the measured forwards around L
// ("interpolated"), or beyond the longest through the two longest
// ("extrapolated"; proportional to the one when only one was measured). Rows
// say which numbers are measured.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/presets.h"
#include "launch/core/tool_cli.h"
#include "launch/core/train_config.h"
#include "model/model.h"
#include "model/recurrent.h"
#include "model/sampling.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<int64_t> parse_lengths(const std::string& text, const char* option) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    PF_REQUIRE(ConfigError, used == item.size() && v >= 1, option << ": '" << item << "' is not a positive length");
    out.push_back(v);
  }
  PF_REQUIRE(ConfigError, !out.empty(), option << " is empty");
  return out;
}

SamplingOptions bench_sampling() {
  SamplingOptions s;
  s.allow_end = false;
  return s;
}

struct Measure {
  double seconds = 0;
  int64_t peak = 0;
};

// Tokens [from, length) generated from an empty state at position `from`
// (from = 0: a whole protein).
Measure recurrent_run(PerformerModel& model, const ExecContext& ctx, MemoryTracker& tracker, int64_t length,
                      int64_t from) {
  RecurrentPerformer rec(model, ctx, 1);
  rec.reset(from);
  std::vector<float> logits(static_cast<size_t>(model.config().vocab));
  const SamplingOptions s = bench_sampling();
  tracker.reset_peak();
  int32_t token = 1;  // <end> starts a protein
  const double t0 = seconds_now();
  for (int64_t t = from; t < length; ++t) {
    rec.step(&token, logits.data());
    token = sample_token(logits.data(), model.config().vocab, s, sampling_uniform(1, 0, static_cast<uint64_t>(t)));
  }
  return Measure{seconds_now() - t0, tracker.stats().peak_bytes};
}

ModelInput prefix_input(const std::vector<int32_t>& tokens) {
  ModelInput in;
  in.batch = 1;
  in.n = static_cast<int64_t>(tokens.size());
  in.inputs = tokens;
  in.targets.assign(tokens.size(), -1);
  return in;
}

// One parallel forward over `length` tokens.
Measure forward_run(PerformerModel& model, MemoryTracker& tracker, int64_t length) {
  std::vector<int32_t> tokens(static_cast<size_t>(length));
  const KeyedRandom r(3, 5, 7);
  for (int64_t i = 0; i < length; ++i) tokens[i] = 4 + static_cast<int32_t>(r.draw(static_cast<uint64_t>(i)).v[0] % 20);
  const ModelInput in = prefix_input(tokens);
  std::vector<float> logits;
  tracker.reset_peak();
  const double t0 = seconds_now();
  model.forward(in, 0, &logits);
  return Measure{seconds_now() - t0, tracker.stats().peak_bytes};
}

// The first `k` tokens generated the naive way.
double naive_run(PerformerModel& model, int64_t k) {
  const int64_t V = model.config().vocab;
  const SamplingOptions s = bench_sampling();
  std::vector<int32_t> tokens{1};
  std::vector<float> logits;
  const double t0 = seconds_now();
  for (int64_t t = 0; t < k; ++t) {
    model.forward(prefix_input(tokens), 0, &logits);
    tokens.push_back(sample_token(logits.data() + (static_cast<int64_t>(tokens.size()) - 1) * V, V, s,
                                  sampling_uniform(1, 0, static_cast<uint64_t>(t))));
  }
  return seconds_now() - t0;
}

}  // namespace

int run_generate(int argc, char** argv) {
  CLI::App app{"performer-bench generate: recurrent generation vs the parallel forward recomputed per token"};
  std::string preset = "small", lengths_text = "1000,10000,100000", naive_text = "1000,10000", csv;
  int64_t naive_tokens = 64, full_up_to = 100000, tail_tokens = 1000;
  std::vector<std::string> sets;
  app.add_option("--preset", preset, "small, medium or paper (the shapes of performer-bench train's presets)")
      ->capture_default_str();
  app.add_option("--lengths", lengths_text, "generated lengths, comma-separated")->capture_default_str();
  app.add_option("--naive-tokens", naive_tokens, "tokens generated the naive way and timed")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--naive-lengths", naive_text, "lengths of the timed parallel forwards the naive time is fitted on")
      ->capture_default_str();
  app.add_option("--full-up-to", full_up_to,
                 "recurrent lengths up to this are generated whole; longer ones are timed over their last "
                 "--tail-tokens tokens (from an empty state at that position) and extrapolated")
      ->capture_default_str();
  app.add_option("--tail-tokens", tail_tokens, "tokens timed for a recurrent length above --full-up-to")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--set", sets, "override a model key: model.key=value (repeatable)");
  app.add_option("--csv", csv, "write the CSV here instead of stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  std::vector<std::string> all = model_preset(preset);
  all.insert(all.end(), sets.begin(), sets.end());
  const TrainConfig cfg = load_train_config("", all);
  const std::vector<int64_t> lengths = parse_lengths(lengths_text, "--lengths");
  // In increasing order, each once: a naive length's peak is read between
  // the measured forwards around it.
  std::vector<int64_t> naive_lengths = parse_lengths(naive_text, "--naive-lengths");
  std::sort(naive_lengths.begin(), naive_lengths.end());
  naive_lengths.erase(std::unique(naive_lengths.begin(), naive_lengths.end()), naive_lengths.end());
  PF_REQUIRE(ConfigError, naive_tokens >= 1, "--naive-tokens must be >= 1, got " << naive_tokens);

  MemoryTracker tracker(Device::cpu());
  ExecResources res(Device::cpu(), tracker);
  PerformerModel model(cfg.model, res.ctx(), nullptr);
  CsvOutput csv_out(csv, "preset,method,length,seconds,tokens_per_s,peak_bytes,time,memory\n");
  std::FILE* out = csv_out.file();
  auto row = [&](const char* method, int64_t length, double seconds, int64_t peak, const char* time, const char* mem) {
    std::fprintf(out, "%s,%s,%lld,%.4f,%.2f,%lld,%s,%s\n", preset.c_str(), method, static_cast<long long>(length),
                 seconds, static_cast<double>(length) / seconds, static_cast<long long>(peak), time, mem);
    std::fflush(out);
  };

  for (int64_t L : lengths) {
    if (L <= full_up_to) {
      const Measure m = recurrent_run(model, res.ctx(), tracker, L, 0);
      std::fprintf(stderr, "recurrent %lld tokens: %.2f s, %.1f tokens/s, peak %s\n", static_cast<long long>(L),
                   m.seconds, L / m.seconds, format_bytes(m.peak).c_str());
      row("recurrent", L, m.seconds, m.peak, "measured", "measured");
    } else {
      // The per-token work does not depend on the position (the state has a
      // fixed size), so the last tokens' rate stands for the whole length.
      const int64_t k = std::min(tail_tokens, L);
      const Measure m = recurrent_run(model, res.ctx(), tracker, L, L - k);
      const double seconds = m.seconds * static_cast<double>(L) / static_cast<double>(k);
      std::fprintf(stderr, "recurrent %lld tokens: positions %lld..%lld timed (%.2f s), %.1f tokens/s, peak %s\n",
                   static_cast<long long>(L), static_cast<long long>(L - k), static_cast<long long>(L), m.seconds,
                   k / m.seconds, format_bytes(m.peak).c_str());
      row("recurrent", L, seconds, m.peak, "extrapolated_from_tail", "measured");
    }
  }

  // Naive: K tokens timed directly, forwards timed at the fit lengths.
  tracker.reset_peak();
  const double naive_k = naive_run(model, naive_tokens);
  const int64_t naive_k_peak = tracker.stats().peak_bytes;
  std::vector<double> x, y;
  std::vector<int64_t> peaks;
  for (int64_t n : naive_lengths) {
    const Measure f = forward_run(model, tracker, n);
    std::fprintf(stderr, "parallel forward over %lld tokens: %.3f s, peak %s\n", static_cast<long long>(n), f.seconds,
                 format_bytes(f.peak).c_str());
    x.push_back(static_cast<double>(n));
    y.push_back(f.seconds);
    peaks.push_back(f.peak);
    std::fprintf(out, "%s,parallel_forward,%lld,%.4f,%.2f,%lld,measured,measured\n", preset.c_str(),
                 static_cast<long long>(n), f.seconds, static_cast<double>(n) / f.seconds,
                 static_cast<long long>(f.peak));
  }
  // f(t): piecewise linear through the measured points (the mean forward of
  // the K naive tokens stands at t = K / 2), constant below the first point,
  // continued with the last segment's slope above the last (constant when
  // there is only one point).
  std::vector<std::pair<double, double>> pts{{naive_tokens / 2.0, naive_k / static_cast<double>(naive_tokens)}};
  for (size_t i = 0; i < x.size(); ++i) pts.emplace_back(x[i], y[i]);
  std::sort(pts.begin(), pts.end());
  // Points at one t (a length given twice, or at K / 2) become their mean, so
  // that no segment has zero width.
  std::vector<std::pair<double, double>> merged;
  for (size_t i = 0; i < pts.size();) {
    size_t j = i;
    double sum = 0;
    for (; j < pts.size() && pts[j].first == pts[i].first; ++j) sum += pts[j].second;
    merged.emplace_back(pts[i].first, sum / static_cast<double>(j - i));
    i = j;
  }
  pts.swap(merged);
  auto f = [&](double t) {
    if (t <= pts.front().first) return pts.front().second;
    for (size_t i = 1; i < pts.size(); ++i)
      if (t <= pts[i].first || i + 1 == pts.size()) {
        const auto& [x0, y0] = pts[i - 1];
        const auto& [x1, y1] = pts[i];
        return y0 + (y1 - y0) * (t - x0) / (x1 - x0);
      }
    return pts.back().second;
  };
  auto naive_seconds = [&](int64_t L) {
    double total = 0;
    for (int64_t t = 1; t <= L; ++t) total += f(static_cast<double>(t));
    return total;
  };
  std::fprintf(stderr, "naive: %lld tokens generated in %.3f s (the interpolation predicts %.3f s)\n",
               static_cast<long long>(naive_tokens), naive_k, naive_seconds(naive_tokens));
  std::fprintf(out, "# naive: sum over t of f(t), f piecewise linear through (t, seconds per forward):");
  for (const auto& [px, py] : pts) std::fprintf(out, " (%.0f, %.6g)", px, py);
  std::fprintf(out, "\n");
  row("naive", naive_tokens, naive_k, naive_k_peak, "measured", "measured");
  for (int64_t L : lengths) {
    int64_t peak = 0;
    const char* mem = "measured";
    bool found = false;
    for (size_t i = 0; i < x.size(); ++i)
      if (static_cast<int64_t>(x[i]) == L) {
        peak = peaks[i];
        found = true;
      }
    if (!found && x.size() == 1) {  // proportional to the one measured forward
      peak = static_cast<int64_t>(static_cast<double>(peaks[0]) / x[0] * static_cast<double>(L));
      mem = "extrapolated";
    } else if (!found) {  // linear through the measured forwards around L, or the last two beyond them
      size_t i = 1;
      while (i + 1 < x.size() && x[i] < static_cast<double>(L)) ++i;
      const double slope = static_cast<double>(peaks[i] - peaks[i - 1]) / (x[i] - x[i - 1]);
      peak = static_cast<int64_t>(static_cast<double>(peaks[i - 1]) + slope * (static_cast<double>(L) - x[i - 1]));
      const bool inside = static_cast<double>(L) > x.front() && static_cast<double>(L) < x.back();
      mem = inside ? "interpolated" : "extrapolated";
    }
    row("naive", L, naive_seconds(L), peak, "extrapolated", mem);
  }
  csv_out.commit();
  return 0;
}

}  // namespace pf::bench
