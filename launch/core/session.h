// What a launched process sets up before it trains or evaluates: MPI with
// MPI_THREAD_MULTIPLE (the attention scan and the gradient allreduce run on
// worker threads while the main thread computes and communicates), the
// device (a GPU chosen from the node-local rank when the build and node have
// one and the config allows it, else the CPU), the world communicator on that
// device (NCCL for GPUs, MPI for the CPU), the dp x sp grid, the memory tracker
// with the configured cap and the execution context.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

#include "data/loader.h"
#include "launch/core/train_config.h"
#include "model/objective.h"
#include "runtime/exec.h"
#include "runtime/grid.h"
#include "runtime/watchdog.h"

namespace pf {

class Session {
 public:
  // The ranks of `comm` (MPI_COMM_WORLD for a launched program) form the world.
  explicit Session(const TrainConfig& cfg, MPI_Comm comm = MPI_COMM_WORLD);
  ~Session();
  ParallelGrid& grid() { return *grid_; }
  const ExecContext& ctx() const { return resources_->ctx(); }
  MemoryTracker& tracker() { return *tracker_; }
  Device device() const { return device_; }
  // The communicator backend device.comm resolved to: mpi, nccl or staged.
  const std::string& comm_backend() const { return comm_backend_; }
  bool is_root() const { return rank_ == 0; }
  // Bounds every wait on another rank (parallel.timeout_s, runtime/watchdog.h).
  Watchdog& watchdog() { return *watchdog_; }
  // On rank 0, where each rank runs: each node's ranks in node-local order
  // (the order that picks a node's GPUs), "node1 ranks 0,2 | node2 ranks 1,3".
  const std::string& placement() const { return placement_; }
  // The ranks of this job on this rank's node (which share its memory).
  int node_ranks() const { return node_ranks_; }
  // Runs `check` on rank 0 only (what only rank 0 touches: the checkpoint
  // folder, the metrics file) and gives every rank its outcome: an exception
  // it throws is rethrown on every rank as a ConfigError with its message, so
  // that all ranks stop alike, before step 1, with exit status 2.
  void root_check(const std::function<void()>& check);
  // Runs `value` on rank 0 only and gives every rank its result (errors as
  // root_check): a choice that the ranks must share, made once.
  std::string root_value(const std::function<std::string()>& value);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  std::unique_ptr<Watchdog> watchdog_;  // first: destroyed after the communicators that report to it
  Device device_;
  std::string comm_backend_;
  std::string placement_;
  int node_ranks_ = 1;
  std::unique_ptr<MemoryTracker> tracker_;
  std::unique_ptr<ExecResources> resources_;
  std::unique_ptr<ParallelGrid> grid_;
};

// Training: data.shuffle and data.sampling as configured; Evaluation: every
// sequence of the split once, in file order.
enum class LoaderUse { Training, Evaluation };
// Loader options for this rank and a split.
LoaderOptions loader_options(const TrainConfig& cfg, const ParallelGrid& grid, const std::string& split,
                             LoaderUse use);

// A loader batch as the model's TokenBatch: int32 tokens, the lookahead token
// only where it is the next token of the same sample (never across the end
// of a sample, so every layout predicts the same targets), global sample ids.
TokenBatch to_token_batch(const Batch& batch, const ParallelGrid& grid);

}  // namespace pf
