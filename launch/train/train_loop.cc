#include "launch/train/train_loop.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launch/train/checkpoint.h"
#include "launch/train/stop_signal.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/comm.h"

namespace pf {
namespace {

std::string format_duration(double s) {
  char buf[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

// On the tensor's stream, after the work queued there (the last step's update).
std::vector<float> to_host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  copy_bytes(t.stream(), v.data(), Device::cpu(), t.raw(), t.device(), t.nbytes());
  synchronize(t.stream());
  return v;
}

void to_device(Tensor& t, const std::vector<float>& v) {
  copy_bytes(t.stream(), t.raw(), t.device(), v.data(), Device::cpu(), t.nbytes());
  synchronize(t.stream());
}

std::string save_checkpoint(const TrainConfig& cfg, Session& session, Trainer& trainer, const DataLoader& loader) {
  const std::string path = checkpoint_path(cfg.checkpoint.dir, trainer.step());
  if (session.is_root()) {
    CheckpointState st;
    st.step = trainer.step();
    st.loader = loader.position();
    st.config_text = cfg.source_text;
    st.dp = session.grid().dp_size();
    st.sp = session.grid().sp_size();
    st.params = to_host(trainer.model().params());
    st.m = to_host(trainer.moment1());
    st.v = to_host(trainer.moment2());
    st.loss_scale = trainer.loss_scaler().scale();
    st.loss_scale_good_steps = trainer.loss_scaler().good_steps();
    write_checkpoint(path, st, trainer.model().layout(), cfg.model);
    prune_checkpoints(cfg.checkpoint.dir, cfg.checkpoint.keep);
  }
  session.grid().world().barrier();
  return path;
}

}  // namespace

LoaderPosition restore_checkpoint(const std::string& path, const TrainConfig& cfg, Trainer& trainer) {
  const CheckpointState st = read_checkpoint(path, trainer.model().layout());
  const TrainConfig stored = parse_train_config_text(st.config_text, path + " (stored configuration)");
  const std::vector<std::string> diff = model_incompatibilities(stored.model, cfg.model);
  if (!diff.empty()) {
    std::string msg = path + ": checkpoint is from an incompatible model configuration:";
    for (const auto& d : diff) msg += "\n  " + d;
    throw ConfigError(msg);
  }
  PF_REQUIRE(ConfigError, st.step <= cfg.run.steps,
             path << ": checkpoint is at step " << st.step << ", past train.steps = " << cfg.run.steps);
  to_device(trainer.model().params(), st.params);
  to_device(trainer.moment1(), st.m);
  to_device(trainer.moment2(), st.v);
  trainer.set_step(st.step);
  // The checkpoint holds fp32 master weights, so a run may resume in another
  // model.dtype; the loss scale carries over only within the same dtype (an
  // f32 run's scale of 1 is no start for f16).
  if (st.loss_scale > 0 && stored.model.dtype == cfg.model.dtype)
    trainer.loss_scaler().restore(st.loss_scale, st.loss_scale_good_steps);
  return st.loader;
}

int64_t load_parameters(const std::string& path, const TrainConfig& cfg, Trainer& trainer) {
  const CheckpointState st = read_checkpoint(path, trainer.model().layout());
  const TrainConfig stored = parse_train_config_text(st.config_text, path + " (stored configuration)");
  const std::vector<std::string> diff = model_incompatibilities(stored.model, cfg.model, true);
  if (!diff.empty()) {
    std::string msg = path + ": cannot load these parameters into this model:";
    for (const auto& d : diff) msg += "\n  " + d;
    throw ConfigError(msg);
  }
  to_device(trainer.model().params(), st.params);
  return st.step;
}

EvalStats run_validation(const TrainConfig& cfg, Session& session, Trainer& trainer) {
  LoaderOptions o = loader_options(cfg, session.grid(), cfg.data.valid_split, false);
  o.prefetch = 0;
  DataLoader loader(o);
  const int64_t batches = cfg.run.eval_batches > 0 ? std::min(cfg.run.eval_batches, loader.steps_per_epoch())
                                                   : loader.steps_per_epoch();
  EvalStats total;
  for (int64_t i = 0; i < batches; ++i) {
    const EvalStats e = trainer.evaluate(to_token_batch(loader.next(), session.grid()));
    total.loss_sum += e.loss_sum;
    total.tokens += e.tokens;
    total.correct += e.correct;
  }
  return total;
}

TrainOutcome run_training(const TrainConfig& cfg, Session& session, std::ostream& log) {
  const bool root = session.is_root();
  ParallelGrid& grid = session.grid();
  Trainer trainer(cfg.model, cfg.optimizer, grid, session.ctx(), cfg.parallel.attention,
                  cfg.parallel.bucket_mib << 20, cfg.parallel.overlap_allreduce);
  TrainOutcome out;

  // Resume.
  std::string resume_path;
  if (cfg.checkpoint.resume == "auto") {
    if (!cfg.checkpoint.dir.empty()) {
      std::vector<std::string> skipped;
      resume_path = latest_valid_checkpoint(cfg.checkpoint.dir, trainer.model().layout(), &skipped);
      if (root)
        for (const auto& s : skipped) log << "warning: skipping unusable checkpoint " << s << "\n";
    }
  } else if (!cfg.checkpoint.resume.empty()) {
    resume_path = cfg.checkpoint.resume;
  }
  LoaderPosition start;
  if (!resume_path.empty()) {
    start = restore_checkpoint(resume_path, cfg, trainer);
    if (root)
      log << "resumed from " << resume_path << " at step " << trainer.step() << " (data epoch " << start.epoch
          << ", sample " << start.sample << ")\n";
  } else if (!cfg.checkpoint.init_from.empty()) {
    const int64_t from = load_parameters(cfg.checkpoint.init_from, cfg, trainer);
    if (root)
      log << "parameters from " << cfg.checkpoint.init_from << " (step " << from << "): starting at step 0 with "
          << attention_kind_name(cfg.model.attention) << " attention\n";
  } else if (root && cfg.checkpoint.resume == "auto") {
    log << "no checkpoint to resume from in '" << cfg.checkpoint.dir << "': starting at step 0\n";
  }
  out.first_step = trainer.step();

  DataLoader loader(loader_options(cfg, grid, cfg.data.train_split, cfg.data.shuffle));
  loader.set_position(start);
  std::ofstream metrics;
  if (root && !cfg.run.metrics.empty()) {
    const std::filesystem::path mp(cfg.run.metrics);
    if (mp.has_parent_path()) std::filesystem::create_directories(mp.parent_path());
    metrics.open(cfg.run.metrics, trainer.step() > 0 ? std::ios::app : std::ios::trunc);
    PF_REQUIRE(IoError, metrics.good(), "cannot open train.metrics file '" << cfg.run.metrics << "'");
  }
  auto validate = [&] {
    const EvalStats e = run_validation(cfg, session, trainer);
    if (root) {
      char line[256];
      std::snprintf(line, sizeof line, "validation at step %lld | loss %.4f | ppl %.3f | acc %.4f | %lld tokens\n",
                    static_cast<long long>(trainer.step()), e.loss(), e.perplexity(), e.accuracy(),
                    static_cast<long long>(e.tokens));
      log << line << std::flush;
      if (metrics.is_open())
        metrics << nlohmann::json{{"eval",
                                   {{"step", trainer.step()},
                                    {"loss", e.loss()},
                                    {"ppl", e.perplexity()},
                                    {"accuracy", e.accuracy()},
                                    {"tokens", e.tokens}}}}
                       .dump()
                << "\n"
                << std::flush;
    }
    out.validation = e;
  };

  install_stop_handlers();
  const int64_t tokens_per_step = grid.dp_size() * cfg.data.batch_size * cfg.data.sample_length;
  double avg_step = 0;
  const double run_start = seconds_now();
  while (trainer.step() < cfg.run.steps) {
    const double t0 = seconds_now();
    const Batch batch = loader.next();
    const double data_time = seconds_now() - t0;
    const StepStats st = trainer.train_step(to_token_batch(batch, grid));
    out.last_loss = st.loss;
    int stop = stop_requested() ? 1 : 0;
    if (cfg.run.stop_at > 0 && trainer.step() >= cfg.run.stop_at && trainer.step() < cfg.run.steps) stop = 2;
    allreduce_host_values(grid.world(), &stop, 1, DType::i32, ReduceOp::Max, session.tracker());
    const double step_time = seconds_now() - t0;
    avg_step = avg_step == 0 ? step_time : 0.9 * avg_step + 0.1 * step_time;
    const int64_t done = trainer.step();
    if (root && st.skipped)
      log << "step " << done << ": gradients not finite at loss scale " << st.loss_scale
          << ": update skipped, loss scale now " << trainer.loss_scaler().scale() << "\n"
          << std::flush;
    if (root && (done % cfg.run.log_interval == 0 || done == out.first_step + 1 || done == cfg.run.steps)) {
      char line[320];
      std::snprintf(line, sizeof line,
                    "step %lld/%lld | loss %.4f | ppl %.3f | acc %.4f | %.0f tok/s | lr %.3g | peak %s | eta %s\n",
                    static_cast<long long>(done), static_cast<long long>(cfg.run.steps), st.loss, std::exp(st.loss),
                    st.accuracy, tokens_per_step / step_time, st.lr, format_bytes(st.peak_bytes).c_str(),
                    format_duration(avg_step * static_cast<double>(cfg.run.steps - done)).c_str());
      log << line << std::flush;
    }
    if (metrics.is_open())
      metrics << nlohmann::json{{"step", done},
                                {"loss", st.loss},
                                {"ppl", std::exp(st.loss)},
                                {"accuracy", st.accuracy},
                                {"tokens_per_s", tokens_per_step / step_time},
                                {"lr", st.lr},
                                {"grad_norm", st.grad_norm},
                                {"loss_scale", st.loss_scale},
                                {"skipped", st.skipped},
                                {"peak_bytes", st.peak_bytes},
                                {"seconds", step_time},
                                {"time",
                                 {{"data", data_time},
                                  {"attention", st.model.attention},
                                  {"scan", st.model.scan},
                                  {"scan_exposed", st.model.scan_exposed},
                                  {"other", st.model.other},
                                  {"allreduce", st.allreduce},
                                  {"allreduce_exposed", st.allreduce_exposed},
                                  {"optimizer", st.optimizer}}}}
                     .dump()
              << "\n"
              << std::flush;
    if (stop) {
      if (root) {
        if (stop == 2) log << "train.stop_at = " << cfg.run.stop_at << " reached: saving a checkpoint at step " << done << "\n";
        else log << "stop requested (signal " << stop_signal_number() << "): saving a checkpoint at step " << done << "\n";
      }
      if (!cfg.checkpoint.dir.empty()) out.checkpoint = save_checkpoint(cfg, session, trainer, loader);
      out.stopped_by_signal = true;
      break;
    }
    if (cfg.run.eval_interval > 0 && done % cfg.run.eval_interval == 0 && done < cfg.run.steps) validate();
    if (!cfg.checkpoint.dir.empty() && cfg.checkpoint.interval > 0 && done % cfg.checkpoint.interval == 0 &&
        done < cfg.run.steps) {
      out.checkpoint = save_checkpoint(cfg, session, trainer, loader);
      if (root) log << "checkpoint " << out.checkpoint << "\n";
    }
  }
  if (!out.stopped_by_signal) {
    validate();
    if (!cfg.checkpoint.dir.empty()) {
      out.checkpoint = save_checkpoint(cfg, session, trainer, loader);
      if (root) log << "checkpoint " << out.checkpoint << "\n";
    }
  }
  out.last_step = trainer.step();
  if (root)
    log << "done: " << (out.last_step - out.first_step) << " steps in " << format_duration(seconds_now() - run_start)
        << "\n"
        << std::flush;
  return out;
}

}  // namespace pf
