// performer-train: trains a Performer protein language model.
//   mpirun -np N performer-train --config run.toml [--set key=value ...] [--resume auto|FILE] [--plan]
// The dp x sp layout comes from parallel.sp (dp = N / sp). See docs/usage.md
// and docs/configuration.md.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "launch/core/model_rules.h"
#include "launch/core/mpi_program.h"
#include "launch/core/session.h"
#include "launch/core/stop_signal.h"
#include "launch/core/tool_cli.h"
#include "launch/core/train_config.h"
#include "launch/train/train_loop.h"
#include "model/planner.h"
#include "runtime/check.h"
#include "runtime/memory.h"

int main(int argc, char** argv) {
  // First of all: a stop signal during start-up is recorded like any other
  // and acted on after the first step (docs/checkpoints.md, Preemption).
  pf::install_stop_handlers();
  CLI::App app{"Train a Performer protein language model (launch under mpirun for several ranks)"};
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;
  bool plan = false, print_config = false;
  app.add_option("--config", config_path, "TOML configuration (docs/configuration.md)")->check(CLI::ExistingFile);
  app.add_option("--set", overrides, "override a key: section.key=value (repeatable)")->allow_extra_args(false);
  app.add_option("--resume", resume, "auto (newest valid checkpoint in checkpoint.dir) or a checkpoint file");
  app.add_flag("--plan", plan, "print the memory plan of one rank and exit");
  app.add_flag("--print-config", print_config, "print the resolved configuration and exit");
  if (const auto status = pf::parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  return pf::run_mpi_program(argc, argv, "performer-train", [&](int size, int rank) {
    if (!resume.empty()) {
      for (const std::string& o : overrides)
        PF_REQUIRE(pf::ConfigError, o.rfind("checkpoint.resume=", 0) != 0,
                   "--resume " << resume << " and --set '" << o << "' both say where to resume from: give one");
      overrides.push_back("checkpoint.resume=" + pf::toml_quoted(resume));
    }
    const pf::TrainConfig cfg = pf::load_train_config(config_path, overrides);
    const int64_t sp = cfg.parallel.sp;
    // --plan and --print-config run alone too (no mpirun): every rank of a
    // launched job has the same plan, so one process plans for any sp.
    const bool inspect = print_config || plan;
    pf::validate_layout(cfg, inspect && size == 1 ? static_cast<int>(sp) : size);
    pf::validate_training_window(cfg);
    const std::string layout = size > 1 ? "dp " + std::to_string(size / sp) + " x sp " + std::to_string(sp)
                                        : "sp " + std::to_string(sp) + ", any dp";
    if (inspect) {
      if (rank == 0) {
        if (print_config) std::cout << cfg.source_text;
        if (plan) {
          const pf::MemoryPlan p = pf::plan_memory(cfg.model, cfg.data.batch_size, cfg.data.sample_length / sp, true,
                                                   pf::Device::cpu(), pf::packs_proteins(cfg.data.mode), sp);
          // The CPU's per-thread tiles count this process's threads: a plan
          // made on a login node says which it assumed.
          std::cout << "memory plan per rank (" << layout << ", " << cfg.data.batch_size << " x "
                    << cfg.data.sample_length / sp << " tokens; cpu, " << omp_get_max_threads()
                    << " thread(s) as OMP_NUM_THREADS gives them): " << p.summary() << "\n";
          if (cfg.device.memory_cap > 0)
            std::cout << (p.peak <= cfg.device.memory_cap ? "fits under" : "EXCEEDS") << " the cap of "
                      << pf::format_bytes(cfg.device.memory_cap) << "\n";
        }
      }
      return 0;
    }
    const int64_t dp_size = size / sp;
    pf::Session session(cfg, MPI_COMM_WORLD);
    if (rank == 0) {
      std::cout << "performer-train: " << size << " rank(s) as dp " << dp_size << " x sp " << sp << " on "
                << session.device().str() << " (" << session.comm_backend() << " communicator)\n"
                << "placement: " << session.placement() << "\n"
                << "# resolved configuration\n"
                << cfg.source_text << std::flush;
    }
    const pf::TrainOutcome out = pf::run_training(cfg, session, std::cout);
    (void)out;
    return 0;
  });
}
