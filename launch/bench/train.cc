// performer-bench train: training-step throughput and its breakdown, under
// mpirun at any rank count (strong and weak scaling drivers call it), and the
// longest local length under a memory cap.
//   mpirun -np N performer-bench train --preset small|medium|paper [--length n_local] [--batch B]
//          [--sp S] [--steps K] [--warmup W] [--set model.key=value ...] [--cap 16GiB] [--data FILE]
//          [--csv FILE]
//   [mpirun -np N] performer-bench train --preset paper --longest --cap 16GiB [--confirm] [--sp S]
//          [--checkpointing both|on|off]
// (--confirm under mpirun runs the step over all ranks: one sample of
// n x sp tokens per sequence-parallel group, each rank under the cap.)
// Each timed step reports tokens/s (all ranks) and seconds split into
// attention compute, scan (its exposed part separately), other compute,
// gradient and scalar allreduce, optimizer and data; plus the peak bytes of
// rank 0, the largest peak of any rank and the planner's prediction for the
// same configuration (and, after the table, one "# rank" line per rank with
// its planned bytes, tracked peak and device pool high-water mark); and the
// step's nominal FLOPs (launch/bench/flops.h) with their rate as a fraction
// of the same run's sgemm rate on the same device.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "data/loader.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/flops.h"
#include "launch/bench/presets.h"
#include "launch/bench/timing.h"
#include "launch/core/mpi_program.h"
#include "launch/core/session.h"
#include "launch/core/tool_cli.h"
#include "launch/core/train_config.h"
#include "model/planner.h"
#include "model/trainer.h"
#include "runtime/byte_size.h"
#include "runtime/check.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

TokenBatch synthetic_batch(int64_t B, int64_t L, int64_t begin, int64_t end, int64_t first_sample) {
  TokenBatch b;
  b.batch = B;
  b.n = end - begin;
  b.offset = begin;
  for (int64_t s = 0; s < B; ++s) {
    const KeyedRandom r(7, 11, static_cast<uint64_t>(first_sample + s));
    for (int64_t p = begin; p < end; ++p) b.tokens.push_back(4 + static_cast<int32_t>(r.draw(p).v[0] % 20));
    b.lookahead.push_back(end < L ? 4 + static_cast<int32_t>(r.draw(end).v[0] % 20) : -1);
    b.sample_ids.push_back(static_cast<uint64_t>(first_sample + s));
  }
  return b;
}

struct Args {
  std::string preset = "small", data, csv;
  std::vector<std::string> sets;
  int64_t length = 1024, batch = 1, sp = 0, steps = 3, warmup = 1;
  std::string cap, checkpointing = "both";
  bool longest = false, confirm = false;
};

// The run's configuration: the preset, --set overrides, and the layout,
// sample length (local_length x sp), batch, cap and data of the arguments.
TrainConfig bench_config(const Args& a, int64_t sp, int64_t local_length) {
  std::vector<std::string> sets = model_preset(a.preset);
  sets.insert(sets.end(), a.sets.begin(), a.sets.end());
  sets.push_back("parallel.sp=" + std::to_string(sp));
  sets.push_back("data.sample_length=" + std::to_string(local_length * sp));
  sets.push_back("data.batch_size=" + std::to_string(a.batch));
  if (!a.cap.empty()) sets.push_back("device.memory_cap=" + toml_quoted(a.cap));
  if (!a.data.empty()) sets.push_back("data.files=[" + toml_quoted(a.data) + "]");
  return load_train_config("", sets);
}

// One real step at local length n with checkpointing `ckpt` under the cap,
// over every rank of the run (the sequence-parallel groups of --sp, each rank
// its slice of one synthetic sample per group); returns the largest measured
// peak of any rank.
int64_t confirm_step_ranks(const Args& a, int64_t sp, int64_t n, bool ckpt, double& seconds) {
  TrainConfig cfg = bench_config(a, sp, n);
  cfg.model.checkpoint_activations = ckpt;
  Session session(cfg, MPI_COMM_WORLD);
  ParallelGrid& grid = session.grid();
  Trainer trainer(cfg.model, cfg.optimizer, grid, session.ctx(), cfg.parallel.attention);
  const double t0 = seconds_now();
  const StepStats st = trainer.train_step(
      synthetic_batch(a.batch, n * sp, grid.sp_rank() * n, (grid.sp_rank() + 1) * n, grid.dp_rank() * a.batch));
  seconds = seconds_now() - t0;
  long long peak = static_cast<long long>(st.peak_bytes);
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return peak;
}

// Every rank plans (the planner is deterministic, so all find the same
// lengths); rank 0 writes. A confirming step runs on one rank with a local
// communicator, or, under mpirun with several ranks, over all of them.
int longest_length(const Args& a, const TrainConfig& base, std::FILE* out, int size, int rank) {
  PF_REQUIRE(ConfigError, !a.cap.empty(), "--longest needs --cap (e.g. 16GiB)");
  const int64_t cap = parse_byte_size(a.cap, "--cap");
  int rc = 0;
  // The device a confirming step runs on (device.backend), which the plan is for.
  const bool gpu = base.device.backend == "cuda" || (base.device.backend == "auto" && cuda_device_count() > 0);
  const Device device = gpu ? Device::cuda(0) : Device::cpu();
  // The sequence-parallel group the plan is for: a window's halo buffers
  // exist only across ranks (sp > 1).
  const int64_t sp = a.sp > 0 ? a.sp : size;
  for (bool ckpt : {false, true}) {
    if (a.checkpointing != "both" && ckpt != (a.checkpointing == "on")) continue;
    ModelConfig m = base.model;
    m.checkpoint_activations = ckpt;
    const int64_t n = longest_local_length(m, a.batch, cap, 1024, device, false, sp);
    const MemoryPlan plan = plan_memory(m, a.batch, n, true, device, false, sp);
    if (rank == 0) {
      std::fprintf(out, "%s,%d,%lld,%lld,%lld,%lld\n", a.preset.c_str(), ckpt, static_cast<long long>(a.batch),
                   static_cast<long long>(n), static_cast<long long>(plan.peak), static_cast<long long>(cap));
      std::fflush(out);
      std::fprintf(stderr, "%s, checkpointing %s: longest local length %lld under %s (%s)\n", a.preset.c_str(),
                   ckpt ? "on" : "off", static_cast<long long>(n), format_bytes(cap).c_str(), plan.summary().c_str());
    }
    if (a.confirm && n > 0 && size > 1) {
      double secs = 0;
      const int64_t peak = confirm_step_ranks(a, sp, n, ckpt, secs);
      if (rank == 0) {
        std::fprintf(stderr,
                     "  confirmed on %s over %d ranks (sp %lld): one step of %lld tokens per sample in %.1f s, "
                     "largest measured peak %s (planned %s per rank)\n",
                     device.str().c_str(), size, static_cast<long long>(sp), static_cast<long long>(n * sp), secs,
                     format_bytes(peak).c_str(), format_bytes(plan.peak).c_str());
        std::fprintf(out, "# confirmed,%d,%lld,%lld,%.3f,%s,%d,%lld\n", ckpt, static_cast<long long>(n),
                     static_cast<long long>(peak), secs, device.str().c_str(), size, static_cast<long long>(sp));
      }
      if (peak > cap) rc = 1;
    } else if (a.confirm && n > 0) {
      // One real step at that length with the cap enforced by the allocator,
      // on the device the trainer would use (device.backend).
      MemoryTracker tracker(device, cap);
      ExecResources res(device, tracker);
      ParallelGrid grid(make_local_comm(device), 1);
      Trainer trainer(m, base.optimizer, grid, res.ctx(), base.parallel.attention);
      const double t0 = seconds_now();
      const StepStats st = trainer.train_step(synthetic_batch(a.batch, n, 0, n, 0));
      std::fprintf(stderr, "  confirmed on %s: one step at %lld tokens in %.1f s, measured peak %s (planned %s)\n",
                   device.str().c_str(), static_cast<long long>(n), seconds_now() - t0,
                   format_bytes(st.peak_bytes).c_str(), format_bytes(plan.peak).c_str());
      std::fprintf(out, "# confirmed,%d,%lld,%lld,%.3f,%s\n", ckpt, static_cast<long long>(n),
                   static_cast<long long>(st.peak_bytes), seconds_now() - t0, device.str().c_str());
      if (st.peak_bytes > cap) rc = 1;
    }
  }
  return rc;
}

// Every rank's planned bytes, largest tracked peak over the steps and the
// device pool's high-water mark (-1 on the CPU), gathered on rank 0, which
// writes one "# rank" line each after the table and to stderr.
void report_rank_memory(std::FILE* out, Device device, int64_t planned, int64_t peak, int rank, int size) {
  long long mine[3] = {static_cast<long long>(planned), static_cast<long long>(peak),
                       static_cast<long long>(device_pool_used_high(device))};
  std::vector<long long> all(3 * static_cast<size_t>(size));
  MPI_Gather(mine, 3, MPI_LONG_LONG, all.data(), 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  if (rank != 0) return;
  std::fprintf(out, "# rank,planned_bytes,peak_bytes,pool_high_bytes\n");
  for (int r = 0; r < size; ++r) {
    const long long* v = &all[3 * static_cast<size_t>(r)];
    std::fprintf(out, "# rank,%d,%lld,%lld,%lld\n", r, v[0], v[1], v[2]);
    std::fprintf(stderr, "rank %d on %s: planned %s, tracked peak %s (%+.3f %%), device pool high %s\n", r,
                 device.str().c_str(), format_bytes(v[0]).c_str(), format_bytes(v[1]).c_str(),
                 100.0 * (static_cast<double>(v[1]) / static_cast<double>(v[0]) - 1.0),
                 v[2] < 0 ? "n/a" : format_bytes(v[2]).c_str());
  }
  std::fflush(out);
}

// One rank of the benchmark, inside the MPI frame.
int run_train_ranks(const Args& a, int size, int rank) {
  const int64_t sp = a.sp > 0 ? a.sp : size;
  const TrainConfig cfg = bench_config(a, sp, a.length);

  CsvOutput csv_out(a.csv,
                    a.longest ? "preset,checkpointing,batch,longest_local_length,planned_peak_bytes,cap_bytes\n"
                              : "preset,attention,ranks,dp,sp,batch,local_length,step,seconds,tokens_per_s,attention_s,"
                                "scan_s,scan_exposed_s,other_s,allreduce_s,allreduce_exposed_s,optimizer_s,data_s,"
                                "peak_bytes,planned_bytes,max_peak_bytes,gemm_gflop,attention_gflop,gflops,"
                                "sgemm_gflops,fraction_of_peak,watched_waits\n",
                    rank == 0);
  std::FILE* out = csv_out.file();
  int rc = 0;
  if (a.longest) {
    rc = longest_length(a, cfg, out, size, rank);
  } else {
    Session session(cfg, MPI_COMM_WORLD);
    ParallelGrid& grid = session.grid();
    Trainer trainer(cfg.model, cfg.optimizer, grid, session.ctx(), cfg.parallel.attention,
                    cfg.parallel.bucket_mib << 20, cfg.parallel.overlap_allreduce);
    std::unique_ptr<DataLoader> loader;
    if (!a.data.empty()) loader = std::make_unique<DataLoader>(loader_options(cfg, grid, "train", LoaderUse::Training));
    const int64_t n = a.length, L = n * sp;
    const MemoryPlan plan = plan_memory(cfg.model, a.batch, n, true, session.ctx().device, false, sp);
    // The step's nominal FLOPs per rank, and the sgemm rate of this run's device,
    // measured before the steps with every rank measuring at once.
    const StepFlop flop = training_step_flop(cfg.model, a.batch, n);
    const double sgemm = device_sgemm_gflops(session.ctx(), session.ctx().device.is_cpu() ? 2048 : 8192);
    int64_t step_peak = 0;  // this rank's largest tracked peak over the steps
    for (int64_t i = 0; i < a.warmup + a.steps; ++i) {
      const int64_t s = i - a.warmup + 1;  // the timed steps are 1..steps
      const double t0 = seconds_now();
      const uint64_t waits0 = session.watchdog().completed();
      TokenBatch batch;
      if (loader) {
        batch = to_token_batch(loader->next(), grid);
      } else {
        batch = synthetic_batch(a.batch, L, grid.sp_rank() * n, (grid.sp_rank() + 1) * n,
                                (i * grid.dp_size() + grid.dp_rank()) * a.batch);
      }
      const double data_s = seconds_now() - t0;
      const StepStats st = trainer.train_step(batch);
      const double secs = seconds_now() - t0;
      const uint64_t waits = session.watchdog().completed() - waits0;  // this rank's, before the untimed allreduce
      step_peak = std::max(step_peak, st.peak_bytes);
      long long max_peak = static_cast<long long>(st.peak_bytes);  // over all ranks (untimed)
      MPI_Allreduce(MPI_IN_PLACE, &max_peak, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
      if (rank == 0 && s > 0) {
        const double gflops = flop.total() * 1e-9 / secs;
        std::fprintf(out,
                     "%s,%s,%d,%d,%d,%lld,%lld,%lld,%.4f,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%lld,%lld,%lld,"
                     "%.2f,%.2f,%.1f,%.1f,%.3f,%llu\n",
                     a.preset.c_str(), attention_kind_name(cfg.model.attention), size, grid.dp_size(), grid.sp_size(),
                     static_cast<long long>(a.batch), static_cast<long long>(n), static_cast<long long>(s), secs,
                     static_cast<double>(grid.world_size() * a.batch * n) / secs, st.model.attention, st.model.scan,
                     st.model.scan_exposed, st.model.other, st.allreduce, st.allreduce_exposed, st.optimizer, data_s,
                     static_cast<long long>(st.peak_bytes), static_cast<long long>(plan.peak), max_peak,
                     flop.gemm * 1e-9, flop.attention * 1e-9, gflops, sgemm, gflops / sgemm,
                     static_cast<unsigned long long>(waits));
        std::fflush(out);
      }
    }
    report_rank_memory(out, session.ctx().device, plan.peak, step_peak, rank, size);
  }
  csv_out.commit();
  return rc;
}

}  // namespace

int run_train(int argc, char** argv) {
  CLI::App app{"training-step throughput and breakdown (run under mpirun for several ranks)"};
  Args a;
  app.add_option("--preset", a.preset, "small, medium or paper (6 layers, width 512, 8 heads, FFN 2048, m 256)")
      ->check(CLI::IsMember({"small", "medium", "paper"}));
  app.add_option("--set", a.sets, "override: model.key=value, parallel.key=value, optimizer.key=value");
  app.add_option("--length", a.length, "tokens per rank per sample (local length)")->check(pf::positive_number());
  app.add_option("--batch", a.batch, "samples per data-parallel group")->check(pf::positive_number());
  app.add_option("--sp", a.sp, "sequence-parallel group size (default: all ranks)")->check(pf::number_in(0, 1e18));
  app.add_option("--steps", a.steps, "timed steps (after the warm-up steps)")->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--warmup", a.warmup,
                 "untimed steps first (0: the first timed step also pays the device's and libraries' start)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--cap", a.cap, "per-rank memory cap, e.g. 16GiB")
      ->check([](const std::string& s) {  // named as typed, before any rank starts (parse_byte_size's message)
        try {
          parse_byte_size(s, "--cap");
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--data", a.data, "prepared HDF5 file: read batches with the loader (else synthetic tokens)");
  app.add_option("--csv", a.csv, "write CSV here (default: stdout)");
  app.add_flag("--longest", a.longest, "find the longest local length under --cap with the planner");
  app.add_flag("--confirm", a.confirm,
               "with --longest: run one real step at that length under the cap (on a GPU when device.backend "
               "picks one)");
  CLI::Option* longest = app.get_option("--longest");
  app.add_option("--checkpointing", a.checkpointing, "with --longest: both (default), on or off")
      ->check(CLI::IsMember({"both", "on", "off"}))
      ->needs(longest);
  app.get_option("--confirm")->needs(longest);
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  return run_mpi_program(
      argc, argv, "performer-bench train", [&](int size, int rank) { return run_train_ranks(a, size, rank); },
      MpiErrorReport::Plain);
}

}  // namespace pf::bench
