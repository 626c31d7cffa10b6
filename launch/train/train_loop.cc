#include "launch/train/train_loop.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/cluster_sampling.h"
#include "data/paths.h"
#include "data/prepared_data.h"
#include "data/sample.h"
#include "data/schema.h"
#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/model_rules.h"
#include "launch/core/stop_signal.h"
#include "launch/train/data_identity.h"
#include "launch/train/metrics_log.h"
#include "launch/train/run_lock.h"
#include "launch/train/step_report.h"
#include "model/params.h"
#include "model/planner.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/comm.h"
#include "runtime/memory.h"

namespace pf {
namespace {

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

// The training log (standard output, usually a file under a batch system) is
// checked like the metrics: a run whose log no longer reaches its file stops.
void check_log(std::ostream& log) {
  log.flush();
  PF_REQUIRE(IoError, log.good(),
             "cannot write the training log (standard output; a full disk?): training stops; the checkpoints saved "
             "so far are intact");
}

// What the checkpoints of this run record besides the training state.
struct RunRecord {
  std::string run_id;     // the lineage: drawn by a fresh run, kept on resume
  std::string data_json;  // data_identities_json of the data files
};

// Renames `f` to "<f><suffix>" (or "<f><suffix>-K", the first free name) and
// returns the new name: files set aside are kept, and are neither resumed nor
// pruned (their names are not ckpt-*.h5).
std::string set_aside(const std::string& f, const std::string& suffix) {
  std::string aside = f + suffix;
  for (int k = 1; std::filesystem::exists(std::filesystem::symlink_status(aside)); ++k)
    aside = f + suffix + "-" + std::to_string(k);
  std::filesystem::rename(f, aside);
  return aside;
}

// A file at the name of the checkpoint about to be saved that is not one of
// this run's (a damaged checkpoint that --resume auto skipped, a file of the
// user's that happens to bear the name) is set aside, never replaced.
void keep_what_is_not_ours(const std::string& path, const std::string& run_id, std::ostream& log) {
  if (!std::filesystem::exists(std::filesystem::symlink_status(path))) return;
  std::string why;
  try {
    const CheckpointState there = open_checkpoint(path).metadata();
    if (there.run_id == run_id && !run_id.empty()) return;  // this run's own: replaced
    why = "a checkpoint of " + (there.run_id.empty() ? std::string("a run without a run id") : "run " + there.run_id);
  } catch (const Error& e) {
    why = "not a readable checkpoint: " + std::string(e.what()).substr(0, std::string(e.what()).find('\n'));
  }
  const std::string aside = set_aside(path, ".set-aside");
  log << "checkpoint.dir: " << path << " is not this run's (" << why << "): set aside as " << aside
      << " before saving the checkpoint of this step\n";
}

std::string save_checkpoint(const TrainConfig& cfg, Session& session, Trainer& trainer, const DataLoader& loader,
                            const RunRecord& record, MetricsLog& metrics, std::ostream& log) {
  const std::string path = checkpoint_path(cfg.checkpoint.dir, trainer.step());
  session.watchdog().set_phase("the checkpoint save at step " + std::to_string(trainer.step()) +
                               " (rank 0 writes, the others wait for it)");
  // Checked on every rank (the state is the same on all): a state that is no
  // longer finite must not replace, or push out (checkpoint.keep), the last
  // good checkpoint.
  PF_REQUIRE(TrainingError, trainer.state_is_finite(),
             "step " << trainer.step() << ": the parameters or optimizer moments are not finite: not saving " << path
                     << "; the earlier checkpoints are kept");
  if (session.is_root()) {
    // The metrics reach the disk first: after a crash they hold every step
    // up to the newest checkpoint.
    metrics.sync(trainer.step());
    CheckpointState st;
    st.run_id = record.run_id;
    st.data = record.data_json;
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
    keep_what_is_not_ours(path, record.run_id, log);
    write_checkpoint(path, st, trainer.model().layout(), cfg.model);
    prune_checkpoints(cfg.checkpoint.dir, cfg.checkpoint.keep, record.run_id);
  }
  session.grid().world().barrier();
  return path;
}

// Every split the run reads (training, and validation, which runs at least
// once at the end) is checked against every data file before step 1: a
// mistyped or absent split is a ConfigError naming the key, the file and the
// splits the file has, not a failure after the whole run. Then the
// validation loader is opened once, so a split too short for one sample also
// fails here.
void check_splits(const TrainConfig& cfg, const ParallelGrid& grid) {
  PF_REQUIRE(ConfigError, !cfg.data.files.empty(), "data.files is empty: name the prepared HDF5 file(s)");
  const std::pair<const char*, const std::string*> used[] = {{"data.train_split", &cfg.data.train_split},
                                                             {"data.valid_split", &cfg.data.valid_split}};
  const char* const splits[] = {"train", "valid", "test", kOodSplitName};
  // Files prepared from one source with other split parameters hold some of
  // each other's held-out proteins in their training splits.
  std::vector<std::pair<std::vector<std::string>, std::string>> splits_of;
  std::vector<std::string> digests;
  for (size_t i = 0; i < cfg.data.files.size(); ++i) {
    const std::string& file = cfg.data.files[i];
    PF_REQUIRE(ConfigError, std::filesystem::exists(file), "data.files: '" << file << "' does not exist");
    const PreparedData f = open_prepared_data(file);
    // One file (or a copy) listed twice would train on each protein twice an epoch.
    for (size_t j = 0; j < i; ++j) {
      const std::string& other = cfg.data.files[j];
      std::error_code ec;
      PF_REQUIRE(ConfigError, !std::filesystem::equivalent(file, other, ec),
                 "data.files[" << j << "] '" << other << "' and data.files[" << i << "] '" << file
                               << "' are the same file: each protein would be trained on twice an epoch");
      PF_REQUIRE(ConfigError, f.content_digest().empty() || f.content_digest() != digests[j],
                 "data.files[" << j << "] '" << other << "' and data.files[" << i << "] '" << file
                               << "' hold the same data (content digest " << f.content_digest()
                               << "): each protein would be trained on twice an epoch");
    }
    digests.push_back(f.content_digest());
    std::string has;
    for (const std::string& s : f.split_names()) has += (has.empty() ? "" : ", ") + s;
    for (const auto& [key, split] : used) {
      const bool known = std::find(std::begin(splits), std::end(splits), *split) != std::end(splits);
      PF_REQUIRE(ConfigError, known && f.has_split(*split),
                 key << " = '" << *split << "': '" << file << "' has no split '" << *split
                     << "' (its splits: " << (has.empty() ? "none" : has) << ")");
    }
    PF_REQUIRE(ConfigError, cfg.data.sampling != Sampling::Cluster || f.has_clusters(),
               "data.sampling = \"cluster\": '" << file << "' has no clusters (split rule '" << f.split_rule()
                                                << "'); prepare it with --cluster-identity (docs/data.md), or "
                                                   "sample by sequence");
    splits_of.emplace_back(f.source_names(), f.split_parameters());
  }
  for (size_t a = 0; a < splits_of.size(); ++a)
    for (size_t b = a + 1; b < splits_of.size(); ++b) {
      if (splits_of[a].second == splits_of[b].second) continue;
      for (const std::string& source : splits_of[a].first)
        PF_REQUIRE(ConfigError,
                   std::find(splits_of[b].first.begin(), splits_of[b].first.end(), source) == splits_of[b].first.end(),
                   "data.files '" << cfg.data.files[a] << "' and '" << cfg.data.files[b]
                                  << "' were both prepared from a source named '" << source
                                  << "' but split differently (" << splits_of[a].second << "; " << splits_of[b].second
                                  << "): a protein held out by one would be in the other's training split. "
                                     "Train on one of them, or prepare all from that source in one file");
    }
  LoaderOptions o = loader_options(cfg, grid, cfg.data.valid_split, LoaderUse::Evaluation);
  o.prefetch = 0;
  try {
    DataLoader probe(o);
  } catch (const DataError& e) {
    throw ConfigError(
        "data.valid_split = '" + cfg.data.valid_split +
        "' cannot give one validation sample, and validation runs at least once (at the end): " + e.what() +
        "\nName a split that holds enough (data.valid_split), or prepare the data with a larger "
        "--val-fraction");
  }
}

}  // namespace

LoaderPosition restore_checkpoint(const std::string& path, const TrainConfig& cfg, Trainer& trainer,
                                  CheckpointState* metadata) {
  const CheckpointFile checkpoint = open_checkpoint(path);
  // The model first: a checkpoint of another shape is a ConfigError listing
  // the keys, not a tensor of the wrong shape.
  const ModelConfig stored = checkpoint.stored_model();
  require_same_model(path, stored, cfg.model);
  const CheckpointState st = checkpoint.read_state(trainer.model().layout());
  PF_REQUIRE(ConfigError, st.step <= cfg.run.steps,
             path << ": checkpoint is at step " << st.step << ", past train.steps = " << cfg.run.steps);
  to_device(trainer.model().params(), st.params);
  to_device(trainer.moment1(), st.m);
  to_device(trainer.moment2(), st.v);
  trainer.set_step(st.step);
  // The checkpoint holds fp32 master weights, so a run may resume in another
  // model.dtype; the loss scale carries over only within the same dtype (an
  // f32 run's scale of 1 is no start for f16) and the same scaling (a new
  // optimizer.loss_scale or loss_scale_init starts from the configured scale,
  // as the log of the changes says).
  const LossScaleConfig& now = cfg.optimizer.loss_scale;
  const LossScaleConfig then = checkpoint.config().optimizer.loss_scale;
  if (st.loss_scale > 0 && stored.dtype == cfg.model.dtype && then.mode == now.mode && then.init == now.init)
    trainer.loss_scaler().restore(st.loss_scale, st.loss_scale_good_steps);
  if (metadata) *metadata = checkpoint.metadata();
  return st.loader;
}

namespace {

// The model the checkpoint was written by, after checking it against cfg.
ModelConfig loadable_model(const CheckpointFile& checkpoint, const TrainConfig& cfg) {
  // The stored model is compared before any tensor is read, so another shape
  // is a ConfigError naming each key, not a shape error of the first tensor.
  const ModelConfig stored = checkpoint.stored_model();
  require_loadable_model(checkpoint.path(), stored, cfg.model);
  return stored;
}

}  // namespace

void require_loadable_parameters(const CheckpointFile& checkpoint, const TrainConfig& cfg) {
  checkpoint.check_params(ParamLayout(loadable_model(checkpoint, cfg)));
}

int64_t load_parameters(const CheckpointFile& checkpoint, const TrainConfig& cfg, Trainer& trainer,
                        std::vector<std::string>* fresh) {
  const ParamLayout from(loadable_model(checkpoint, cfg));
  to_device(trainer.model().params(),
            carry_parameters(cfg.model, trainer.model().layout(), from, checkpoint.read_params(from), fresh));
  return checkpoint.metadata().step;
}

namespace {

// What train.metrics must never be: the run's inputs (the data files, the
// configuration file, the checkpoint it starts from), the checkpoint folder
// and the checkpoints in it, and the lock files.
std::vector<GuardedPath> metrics_guarded(const TrainConfig& cfg, const std::string& metrics_lock) {
  std::vector<GuardedPath> guarded;
  for (size_t i = 0; i < cfg.data.files.size(); ++i)
    guarded.push_back({cfg.data.files[i], "data.files[" + std::to_string(i) + "]"});
  if (!cfg.source_path.empty()) guarded.push_back({cfg.source_path, "the configuration file"});
  if (!cfg.checkpoint.resume.empty() && cfg.checkpoint.resume != "auto")
    guarded.push_back({cfg.checkpoint.resume, "checkpoint.resume"});
  if (!cfg.checkpoint.init_from.empty()) guarded.push_back({cfg.checkpoint.init_from, "checkpoint.init_from"});
  const std::string& dir = cfg.checkpoint.dir;
  if (!dir.empty()) {
    guarded.push_back({dir, "checkpoint.dir"});
    guarded.push_back({run_lock_path(dir), "the lock file of checkpoint.dir"});
    // (checkpoints, checkpoints set aside and temporary ones)
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind("ckpt-", 0) == 0)
        guarded.push_back({e.path().string(), "a checkpoint in checkpoint.dir"});
  }
  guarded.push_back({metrics_lock, "the lock file of train.metrics"});
  return guarded;
}

// Checked before step 1, on rank 0, which alone writes there: each folder
// takes new files, and no other live run holds it (run_lock.h). A fresh run
// (no checkpoint.resume) refuses a checkpoint.dir that already holds
// checkpoints: it would mix its own with them, and a later --resume auto
// would pick whichever is newest. train.metrics is claimed (metrics_log.h):
// never an input, a checkpoint or a lock, and locked on the file itself.
void take_folders(const TrainConfig& cfg, const std::string& run_id, std::vector<std::unique_ptr<RunLock>>& locks,
                  MetricsLog& metrics, std::ostream& log) {
  namespace fs = std::filesystem;
  std::string note;
  const std::string& dir = cfg.checkpoint.dir;
  if (!dir.empty()) {
    std::string made = require_writable_folder(dir, "checkpoint.dir");
    locks.push_back(
        std::make_unique<RunLock>(run_lock_path(dir), "checkpoint.dir = '" + dir + "'", run_id, &note, std::move(made)));
    if (!note.empty()) log << note << "\n";
    if (cfg.checkpoint.resume.empty()) {
      const std::vector<std::string> existing = list_checkpoints(dir);
      PF_REQUIRE(ConfigError, existing.empty(),
                 "checkpoint.dir = '" << dir << "' already holds " << existing.size() << " checkpoint(s) (newest "
                                      << existing.front()
                                      << "), and this run starts fresh (no checkpoint.resume): its checkpoints "
                                         "would mix with them. Resume them (--resume auto), or give this run an "
                                         "empty checkpoint.dir");
    }
  }
  if (!cfg.run.metrics.empty()) {
    const fs::path folder = fs::absolute(cfg.run.metrics).lexically_normal().parent_path();
    std::string made = require_writable_folder(folder.string(), "train.metrics = '" + cfg.run.metrics + "'");
    // The owner record lies beside the file the path resolves to: another
    // run may name the same file with another checkpoint.dir, or through a link.
    const std::string lock = metrics_lock_path(cfg.run.metrics);
    if (fs::absolute(fs::path(lock).parent_path()).lexically_normal() != folder) made.clear();  // through a link
    metrics = MetricsLog(cfg.run.metrics, metrics_guarded(cfg, lock), lock);
    note.clear();
    locks.push_back(
        std::make_unique<RunLock>(lock, "train.metrics = '" + cfg.run.metrics + "'", run_id, &note, std::move(made)));
    if (!note.empty()) log << note << "\n";
  }
}

// The data of a resumed run against the data its checkpoint was trained on.
// Returns whether the loader restarts (checkpoint.allow_data_change).
// On rank 0 (the files are read there only: nodes with copies of their own
// could disagree).
bool check_resumed_data(const TrainConfig& cfg, const std::string& path, const CheckpointState& metadata,
                        const std::vector<DataFileIdentity>& now, std::ostream& log) {
  if (metadata.data.empty()) {
    log << "warning: " << path << " was written before checkpoints recorded their data: the data files are not "
        << "compared with those it was trained on\n";
    return false;
  }
  const std::vector<std::string> changes = data_changes(parse_data_identities(metadata.data, path), now);
  if (changes.empty()) return false;
  std::string list;
  for (const std::string& c : changes) list += "\n  " + c;
  PF_REQUIRE(ConfigError, cfg.checkpoint.allow_data_change,
             path << ": the data changed since this checkpoint was written:" << list
                  << "\nA resume would go on with other data than the run was trained on (and, with the splits "
                     "drawn again, validation may hold proteins already trained on). Restore the data the run was "
                     "trained on, or set checkpoint.allow_data_change = true to go on training on the new data "
                     "with the loader restarted");
  log << "checkpoint.allow_data_change: the data changed since " << path << ":" << list
      << "\ngoing on from its parameters and optimizer state on the new data, the loader restarted at its first "
         "sample\n";
  return true;
}

}  // namespace

// The planned peak of one rank (model/planner.h, as --plan prints it) against
// what it may use: device.memory_cap when set, and on the CPU the host's
// memory shared by the job's ranks on the node. A plan beyond it is refused
// before anything is allocated, with the planned size, instead of ending in
// an allocation failure (or the kernel's OOM killer).
void check_memory_plan(const TrainConfig& cfg, Session& session, bool training) {
  const Device device = session.device();
  const MemoryPlan p = plan_memory(cfg.model, cfg.data.batch_size, cfg.data.sample_length / cfg.parallel.sp, training,
                                   device, packs_proteins(cfg.data.mode), cfg.parallel.sp);
  const int64_t host = device.is_cpu() ? host_memory_bytes() : 0;
  std::ostringstream what;
  what << "the memory plan of one rank (" << cfg.data.batch_size << " x " << cfg.data.sample_length / cfg.parallel.sp
       << " tokens, data.batch_size x data.sample_length / parallel.sp) is " << p.summary();
  PF_REQUIRE(ConfigError, cfg.device.memory_cap <= 0 || p.peak <= cfg.device.memory_cap,
             what.str() << ": more than device.memory_cap = " << format_bytes(cfg.device.memory_cap)
                        << "; lower data.sample_length or data.batch_size, or raise parallel.sp");
  const int local = session.node_ranks();
  PF_REQUIRE(
      ConfigError, host <= 0 || p.peak <= host / local,
      what.str() << (local > 1 ? ", " + std::to_string(local) + " ranks on this node: " + format_bytes(p.peak * local)
                               : std::string())
                 << ": more than this machine's memory (" << format_bytes(host)
                 << "); lower data.sample_length or data.batch_size, or raise parallel.sp");
}

namespace {

// The keys that decide which samples an epoch holds and in which order: the
// loader position {epoch, sample} a checkpoint stores means the same samples
// only under the same values. Each changed key as "data.KEY: A in the
// checkpoint, B now".
std::vector<std::string> sample_plan_changes(const DataConfig& then, const DataConfig& now) {
  std::vector<std::string> out;
  auto cmp = [&](const char* key, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(std::string("data.") + key + ": " + a + " in the checkpoint, " + b + " now");
  };
  cmp("mode", sample_mode_name(then.mode), sample_mode_name(now.mode));
  cmp("sampling", sampling_name(then.sampling), sampling_name(now.sampling));
  cmp("sample_length", std::to_string(then.sample_length), std::to_string(now.sample_length));
  cmp("seed", std::to_string(then.seed), std::to_string(now.seed));
  cmp("shuffle", then.shuffle ? "true" : "false", now.shuffle ? "true" : "false");
  cmp("train_split", then.train_split, now.train_split);
  return out;
}

// A resume under another sample plan: refused naming the keys, or (with
// checkpoint.allow_data_change) the loader restarted at its first sample and
// said so; true when it restarts. Never a position read against another plan
// (an epoch would skip or repeat proteins).
// The [optimizer] keys whose values differ between the checkpoint's
// configuration and this run's: a resume may change them (AdamW's moments and
// the step carry on; the schedule and the update use the new values), and
// the log says which it changed, as "optimizer.lr: 0.003 in the checkpoint,
// 0.001 now".
void log_optimizer_changes(const TrainConfig& then, const TrainConfig& now, const std::string& path,
                           std::ostream& log) {
  const toml::table a = toml::parse(format_train_config(then)), b = toml::parse(format_train_config(now));
  const toml::table* ta = a["optimizer"].as_table();
  const toml::table* tb = b["optimizer"].as_table();
  if (!ta || !tb) return;
  auto text_of = [](const toml::node& n, std::ostringstream& out) { n.visit([&](const auto& v) { out << v; }); };
  for (const auto& [key, value] : *tb) {
    std::ostringstream x, y;
    if (const toml::node* old = ta->get(key)) text_of(*old, x);
    text_of(value, y);
    if (x.str() != y.str())
      log << "resumed from " << path << " with optimizer." << key.str() << ": " << x.str() << " in the checkpoint, "
          << y.str() << " now\n";
  }
}

bool check_resumed_plan(const TrainConfig& cfg, const std::string& path, const CheckpointState& metadata,
                        std::ostream& log) {
  if (metadata.config_text.empty()) return false;
  const TrainConfig then = parse_train_config_text(metadata.config_text, path, {});
  log_optimizer_changes(then, cfg, path, log);
  const std::vector<std::string> changes = sample_plan_changes(then.data, cfg.data);
  if (changes.empty()) return false;
  std::string list;
  for (const std::string& c : changes) list += "\n  " + c;
  PF_REQUIRE(ConfigError, cfg.checkpoint.allow_data_change,
             path << ": the sample plan changed since this checkpoint was written:" << list
                  << "\nIts data position (epoch " << metadata.loader.epoch << ", sample " << metadata.loader.sample
                  << ") means other samples under these values. Resume with the values it was trained with, or set "
                     "checkpoint.allow_data_change = true to go on with the loader restarted at its first sample");
  log << "checkpoint.allow_data_change: the sample plan changed since " << path << ":" << list
      << "\ngoing on from its parameters and optimizer state, the loader restarted at its first sample\n";
  return true;
}

// A resume from an earlier checkpoint than the newest of its run starts a new
// branch of it: the newer checkpoints of that run would otherwise be what
// --resume auto picks next, and they would count among checkpoint.keep. They
// are renamed to "<name>.superseded" (kept, but neither resumed nor pruned).
void set_aside_newer(const std::string& dir, const std::string& run_id, int64_t step, const std::string& resumed,
                     std::ostream& log) {
  if (dir.empty()) return;
  for (const auto& [f, newer] : checkpoints_of_run(dir, run_id)) {
    // At the resumed step, another file of the run (the checkpoint of another
    // branch, when the resumed one was set aside) is set aside too.
    if (newer < step || (newer == step && same_file(f, resumed))) continue;
    const std::string aside = set_aside(f, ".superseded");
    log << "resumed at step " << step << ", "
        << (newer == step ? "beside this run's other checkpoint of that step " : "before this run's newer checkpoint ")
        << f << ": set aside as " << aside << " (neither resumed nor pruned)\n";
  }
}

// A resume continues the run that wrote its checkpoint, and saves its next
// checkpoints in checkpoint.dir under the names of their steps. Where that
// folder holds another run's checkpoints, those at steps it saves again would
// be replaced, and --resume auto would then choose between two runs: the
// resume is refused, naming both runs and their files, before anything is
// changed. Files whose metadata does not read are not known to be another
// run's (a damaged checkpoint, which --resume auto skips).
void require_own_folder(const std::string& dir, const std::string& resumed, const CheckpointState& metadata) {
  if (dir.empty()) return;
  auto run_name = [](const std::string& id) {
    return id.empty() ? std::string("a run without a run id") : "run " + id;
  };
  std::string others;
  int64_t count = 0;
  for (const std::string& f : list_checkpoints(dir)) {
    if (same_file(f, resumed)) continue;
    CheckpointState other;
    try {
      other = open_checkpoint(f).metadata();
    } catch (const Error&) {
      continue;
    }
    if (other.run_id == metadata.run_id) continue;
    others += "\n  " + f + " (" + run_name(other.run_id) + ", step " + std::to_string(other.step) +
              (other.step > metadata.step ? ": the resumed run would replace it when it saves that step)" : ")");
    ++count;
  }
  std::string home = std::filesystem::path(resumed).parent_path().string();
  if (home.empty()) home = ".";
  PF_REQUIRE(ConfigError, count == 0,
             "checkpoint.dir = '" << dir << "' holds " << count << " checkpoint(s) of another run than the one "
                                  << "resumed ('" << resumed << "', " << run_name(metadata.run_id) << " at step "
                                  << metadata.step << ", from the folder '" << home << "'):" << others
                                  << "\nA resume saves its checkpoints in checkpoint.dir under the names of their "
                                     "steps, never over another run's. Nothing was changed: resume into the folder "
                                     "of that checkpoint (checkpoint.dir = '"
                                  << home << "') or into an empty one");
}

}  // namespace

namespace {

// What this run claims before the trainer is built: the data is checked
// first (it is only read), then checkpoint.init_from (before checkpoint.dir
// is made or locked), then the folders are taken and the data files'
// identities recorded for the checkpoints.
void claim_run(const TrainConfig& cfg, Session& session, RunRecord& record,
               std::vector<std::unique_ptr<RunLock>>& locks, MetricsLog& metrics, std::vector<DataFileIdentity>& data,
               std::ostream& log) {
  check_memory_plan(cfg, session, true);
  check_splits(cfg, session.grid());
  if (!cfg.checkpoint.init_from.empty() && cfg.checkpoint.resume.empty())
    session.root_check([&] { require_checkpoint_file(cfg.checkpoint.init_from, "checkpoint.init_from"); });
  session.root_check([&] {
    take_folders(cfg, record.run_id, locks, metrics, log);
    data = data_identities(cfg.data.files);
    record.data_json = data_identities_json(data);
  });
}

// The checkpoint checkpoint.resume names ("auto": the newest valid one in
// checkpoint.dir, damaged ones skipped with a warning, chosen by rank 0 for
// all: ranks that read the folder or a file differently, say over a network
// file system, would otherwise restore different steps); "" when none.
std::string checkpoint_to_resume(const TrainConfig& cfg, Session& session, std::ostream& log) {
  if (cfg.checkpoint.resume == "auto") {
    if (cfg.checkpoint.dir.empty()) return "";
    return session.root_value([&] {
      std::vector<std::string> skipped;
      const std::string path = latest_valid_checkpoint(cfg.checkpoint.dir, cfg.model, &skipped);
      for (const auto& s : skipped) log << "warning: skipping unusable checkpoint " << s << "\n";
      return path;
    });
  }
  if (cfg.checkpoint.resume.empty()) return "";
  session.root_check([&] {
    require_checkpoint_file(cfg.checkpoint.resume, "checkpoint.resume", ", or auto for the newest in checkpoint.dir");
  });
  return cfg.checkpoint.resume;
}

// Restores `resume_path` into `trainer` and returns where the loader goes on
// (the start of the data when the data or the sample plan changed); the run
// keeps the checkpoint's run id.
LoaderPosition resume_from(const std::string& resume_path, const TrainConfig& cfg, Session& session, Trainer& trainer,
                           const std::vector<DataFileIdentity>& data, RunRecord& record, std::ostream& log) {
  CheckpointState metadata;
  LoaderPosition start = restore_checkpoint(resume_path, cfg, trainer, &metadata);
  if (!metadata.run_id.empty()) record.run_id = metadata.run_id;
  int restart = 0;
  session.root_check([&] {
    require_own_folder(cfg.checkpoint.dir, resume_path, metadata);
    const bool data_changed = check_resumed_data(cfg, resume_path, metadata, data, log);
    const bool plan_changed = check_resumed_plan(cfg, resume_path, metadata, log);
    restart = data_changed || plan_changed ? 1 : 0;
  });
  allreduce_host_values(session.grid().world(), &restart, 1, DType::i32, ReduceOp::Max, session.tracker());
  if (restart) start = LoaderPosition{};
  if (session.is_root())
    log << "resumed from " << resume_path << " at step " << trainer.step() << " (data epoch " << start.epoch
        << ", sample " << start.sample << ")\n";
  return start;
}

// checkpoint.init_from: the parameters only, from step 0.
void start_from_parameters(const TrainConfig& cfg, Session& session, Trainer& trainer, std::ostream& log) {
  std::vector<std::string> fresh;
  const int64_t from = load_parameters(open_checkpoint(cfg.checkpoint.init_from), cfg, trainer, &fresh);
  if (!session.is_root()) return;
  log << "parameters from " << cfg.checkpoint.init_from << " (step " << from << "): starting at step 0 with "
      << attention_kind_name(cfg.model.attention) << " attention\n";
  if (!fresh.empty()) log << "  not in it, initialised: " << fresh_parameters_text(fresh) << "\n";
}

// Every step fills dp x batch_size samples; a split with fewer would pad
// every step (padding is no training signal, and tokens/s would count it).
void require_one_step_of_samples(const DataLoader& loader, const TrainConfig& cfg, const ParallelGrid& grid) {
  PF_REQUIRE(ConfigError, loader.samples_per_epoch() >= grid.dp_size() * cfg.data.batch_size,
             "data.train_split = '" << cfg.data.train_split << "' has " << loader.samples_per_epoch()
                                    << " sample(s) of data.sample_length = " << cfg.data.sample_length
                                    << ", fewer than one step takes (dp " << grid.dp_size() << " x data.batch_size "
                                    << cfg.data.batch_size << "): lower data.batch_size or use more data");
}

// train.metrics from the resumed step on: later lines are moved aside.
void start_metrics(const TrainConfig& cfg, Session& session, MetricsLog& metrics, int64_t step,
                   const std::string& run_id, std::ostream& log) {
  session.root_check([&] {
    if (cfg.run.metrics.empty()) return;
    const int64_t dropped = metrics.start(step, run_id);
    if (dropped > 0)
      log << "train.metrics: moved " << dropped << " line(s) past step " << step << " to " << metrics.dropped_to()
          << " (written after this checkpoint: by a run that stopped, or by a branch set aside; this run logs "
             "those steps again)\n";
  });
}

// The validation after this step into *out, logged and recorded; false when
// a stop signal (on any rank) ended it before its next batch, so that a
// preemption's short warning is not spent validating: then nothing is
// recorded, and the caller saves and stops.
bool validate_and_report(const TrainConfig& cfg, Session& session, Trainer& trainer, MetricsLog& metrics,
                         std::ostream& log, EvalStats* out) {
  session.watchdog().set_phase("the validation after step " + std::to_string(trainer.step()));
  try {
    *out = run_validation(cfg, session, trainer, nullptr, [] { return stop_signal_number() != 0; });
  } catch (const EvalStopped& e) {
    if (session.is_root())
      log << "stop requested during the validation after step " << trainer.step() << " (" << e.what()
          << "): not recorded\n"
          << std::flush;
    return false;
  }
  if (session.is_root()) {
    log << validation_log_line(trainer.step(), *out) << std::flush;
    check_log(log);
    metrics.write(validation_metrics_record(trainer.step(), *out), trainer.step());
  }
  return true;
}

// The loss is summed over the world, so every rank stops alike. In fp32
// nothing is rounded to 16 bits, so no loss scale brings a loss that is not
// finite back: the run ends before this step is logged or saved. In bf16/f16
// the step is skipped like any other whose gradients overflow, and
// optimizer.max_skipped_steps ends a run that does not recover.
void require_finite_loss(const StepStats& st, const TrainConfig& cfg, int64_t step) {
  PF_REQUIRE(TrainingError, std::isfinite(st.loss) || st.no_targets || cfg.model.dtype != DType::f32,
             "step " << step << ": the loss is " << st.loss
                     << " in fp32 (model.dtype = f32): training diverged, and no loss scale can recover it. "
                        "Stopping without a checkpoint of this state; the earlier checkpoints are kept (resume "
                        "from the last one with a lower optimizer.lr)");
}

// Why the run stops after this step, agreed by every rank: a signal on any
// rank stops every rank, and its number travels with it, so that rank 0 can
// name a signal that only another rank received.
struct StopRequest {
  int signal = 0;   // 0: none
  int stop_at = 0;  // 1: train.stop_at reached
  bool any() const { return signal != 0 || stop_at != 0; }
};

StopRequest agree_on_stop(const TrainConfig& cfg, Session& session, int64_t step) {
  int stop[2] = {stop_signal_number(), cfg.run.stop_at > 0 && step >= cfg.run.stop_at && step < cfg.run.steps};
  allreduce_host_values(session.grid().world(), stop, 2, DType::i32, ReduceOp::Max, session.tracker());
  return StopRequest{stop[0], stop[1]};
}

// Residues and <end> tokens of the step over the world (each sample is
// counted by every rank of its sequence group, so only its first counts).
int64_t useful_tokens_of_step(const TrainConfig& cfg, const Batch& batch, Session& session) {
  int64_t useful = 0;
  for (const SampleInfo& s : batch.samples) useful += useful_tokens(cfg.data.mode, s, cfg.data.sample_length);
  if (session.grid().sp_rank() != 0) useful = 0;
  allreduce_host_values(session.grid().world(), &useful, 1, DType::i64, ReduceOp::Sum, session.tracker());
  return useful;
}

// The step's log lines (every train.log_interval steps, the first and the
// last) and its train.metrics record, on rank 0; `scale_now` is the loss
// scale after a skipped update.
void report_step(const TrainConfig& cfg, Session& session, const StepReport& r, int64_t first_step, double scale_now,
                 MetricsLog& metrics, std::ostream& log) {
  const bool root = session.is_root();
  if (root && r.stats->no_targets)
    log << "step " << r.step
        << ": no residue of the global batch was masked (model.mlm_probability = " << cfg.model.mlm_probability
        << "): nothing to predict, no update\n"
        << std::flush;
  if (root && r.stats->skipped)
    log << "step " << r.step << ": gradients not finite at loss scale " << r.stats->loss_scale
        << ": update skipped, loss scale now " << scale_now << "\n"
        << std::flush;
  if (root && (r.step % cfg.run.log_interval == 0 || r.step == first_step + 1 || r.step == cfg.run.steps))
    log << step_log_line(r) << std::flush;
  if (root) check_log(log);
  if (metrics.is_open()) metrics.write(step_metrics_record(r), r.step);
}

}  // namespace

TrainOutcome run_training(const TrainConfig& cfg, Session& session, std::ostream& log) {
  validate_layout(cfg, session.grid().world().size());
  const bool root = session.is_root();
  ParallelGrid& grid = session.grid();
  RunRecord record{new_run_id(), ""};
  std::vector<std::unique_ptr<RunLock>> locks;
  MetricsLog metrics;                  // on rank 0, which writes it
  std::vector<DataFileIdentity> data;  // on rank 0, which writes the checkpoints
  claim_run(cfg, session, record, locks, metrics, data, log);
  Trainer trainer(cfg.model, cfg.optimizer, grid, session.ctx(), cfg.parallel.attention, cfg.parallel.bucket_mib << 20,
                  cfg.parallel.overlap_allreduce);
  TrainOutcome out;

  const std::string resume_path = checkpoint_to_resume(cfg, session, log);
  LoaderPosition start;
  if (!resume_path.empty())
    start = resume_from(resume_path, cfg, session, trainer, data, record, log);
  else if (!cfg.checkpoint.init_from.empty())
    start_from_parameters(cfg, session, trainer, log);
  else if (root && cfg.checkpoint.resume == "auto" && cfg.checkpoint.dir.empty())
    log << "checkpoint.resume = \"auto\" without a checkpoint.dir: starting at step 0, and saving no checkpoint\n";
  else if (root && cfg.checkpoint.resume == "auto")
    log << "no checkpoint to resume from in '" << cfg.checkpoint.dir << "': starting at step 0\n";
  out.first_step = trainer.step();
  out.last_step = trainer.step();
  if (!resume_path.empty() && trainer.step() >= cfg.run.steps) {
    // A finished run: nothing to train, and its final checkpoint is written
    // (and its final validation, unless a signal stopped the last step);
    // doing them again would rewrite the checkpoint and repeat the final
    // line of train.metrics.
    if (root)
      log << "the run is finished: " << resume_path << " is at step " << trainer.step() << " = train.steps; nothing "
          << "to do (raise train.steps to train further)\n"
          << std::flush;
    return out;
  }

  DataLoader loader(loader_options(cfg, grid, cfg.data.train_split, LoaderUse::Training));
  loader.set_position(start);
  require_one_step_of_samples(loader, cfg, grid);
  start_metrics(cfg, session, metrics, trainer.step(), record.run_id, log);
  // A resume's newer checkpoints are set aside only now, when every check
  // has passed: a run refused before step 1 leaves the folder as it was.
  if (!resume_path.empty())
    session.root_check([&] { set_aside_newer(cfg.checkpoint.dir, record.run_id, trainer.step(), resume_path, log); });
  auto save = [&] { return save_checkpoint(cfg, session, trainer, loader, record, metrics, log); };
  const bool saves = !cfg.checkpoint.dir.empty();

  const int64_t tokens_per_step = grid.dp_size() * cfg.data.batch_size * cfg.data.sample_length;
  double avg_step = 0;
  const double run_start = seconds_now();
  Watchdog& watchdog = session.watchdog();
  while (trainer.step() < cfg.run.steps) {
    const double t0 = seconds_now();
    watchdog.set_phase("step " + std::to_string(trainer.step() + 1));
    const Batch batch = [&] {
      Watchdog::Op wait(&watchdog, "the loader's next training batch");
      return loader.next();
    }();
    const double data_time = seconds_now() - t0;
    const StepStats st = trainer.train_step(to_token_batch(batch, grid));
    require_finite_loss(st, cfg, trainer.step());
    out.last_loss = st.loss;
    const StopRequest stop = agree_on_stop(cfg, session, trainer.step());
    const int64_t useful = useful_tokens_of_step(cfg, batch, session);
    const double step_time = seconds_now() - t0;
    avg_step = avg_step == 0 ? step_time : 0.9 * avg_step + 0.1 * step_time;
    const int64_t done = trainer.step();
    report_step(cfg, session,
                StepReport{done, cfg.run.steps, &st, step_time, data_time, tokens_per_step, useful, avg_step},
                out.first_step, trainer.loss_scaler().scale(), metrics, log);
    if (stop.any()) {
      // train.stop_at is no emergency: the validation due at this step runs
      // first (a resume would not run it). A signal stops at once.
      if (stop.signal == 0 && cfg.run.eval_interval > 0 && done % cfg.run.eval_interval == 0)
        validate_and_report(cfg, session, trainer, metrics, log, &out.validation);
      if (root) {
        if (stop.stop_at)
          log << "train.stop_at = " << cfg.run.stop_at << " reached";
        else
          log << "stop requested (signal " << stop.signal << ")";
        if (saves)
          log << ": saving a checkpoint at step " << done << "\n";
        else
          log << ": stopping at step " << done << " without a checkpoint (checkpoint.dir is not set)\n";
        log << std::flush;
      }
      if (saves) out.checkpoint = save();
      out.stopped_by_signal = true;
      break;
    }
    if (cfg.run.eval_interval > 0 && done % cfg.run.eval_interval == 0 && done < cfg.run.steps &&
        !validate_and_report(cfg, session, trainer, metrics, log, &out.validation)) {
      if (saves) out.checkpoint = save();
      if (root)
        log << (saves ? "checkpoint " + out.checkpoint : std::string("no checkpoint.dir: nothing saved")) << "\n";
      out.stopped_by_signal = true;
      break;
    }
    if (saves && cfg.checkpoint.interval > 0 && done % cfg.checkpoint.interval == 0 && done < cfg.run.steps) {
      out.checkpoint = save();
      if (root) log << "checkpoint " << out.checkpoint << "\n";
    }
  }
  if (!out.stopped_by_signal) {
    out.stopped_by_signal = !validate_and_report(cfg, session, trainer, metrics, log, &out.validation);
    if (saves) {
      out.checkpoint = save();
      if (root) log << "checkpoint " << out.checkpoint << "\n";
    }
  }
  out.last_step = trainer.step();
  if (root) metrics.sync(out.last_step);
  if (root)
    log << "done: " << (out.last_step - out.first_step) << " steps in " << format_duration(seconds_now() - run_start)
        << "\n"
        << std::flush;
  return out;
}

}  // namespace pf
