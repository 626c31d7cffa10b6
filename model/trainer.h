// The parallel training step over a dp x sp grid:
//   1. targets from the objective (global coordinates), the global count of
//      predicted tokens by one scalar allreduce (the loss is a mean over it);
//   2. forward and backward of this rank's block (attention states scanned
//      over the sequence group inside each layer);
//   3. gradients summed over the world (each rank's gradients are partial sums
//      over its tokens), in buckets started while the backward still runs
//      (model/gradient_allreduce.h);
//   4. global-norm clipping and AdamW with decoupled weight decay (none on
//      biases and layer-norm parameters), learning rate from the schedule;
//      the loss is scaled for the backward (model/loss_scaler.h) and a step
//      whose summed gradients are not finite is skipped.
// Every rank ends the step with identical parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/lr_schedule.h"
#include "model/gradient_allreduce.h"
#include "model/loss_scaler.h"
#include "model/model.h"
#include "runtime/grid.h"

namespace pf {

struct OptimizerConfig {
  AdamWConfig adamw;  // lr is taken from the schedule at each step
  LrSchedule schedule;
  double clip_norm = 1.0;  // <= 0 disables clipping
  LossScaleConfig loss_scale;
};

struct StepStats {
  int64_t step = 0;     // the update just taken (0-based)
  double loss = 0;      // mean over the global predicted tokens
  int64_t tokens = 0;   // global predicted tokens
  double accuracy = 0;  // top-1 over them
  double lr = 0;
  double grad_norm = 0;          // before clipping (unscaled; NaN on a skipped step)
  double loss_scale = 1;         // the scale this step's backward used
  bool skipped = false;          // non-finite gradients: no update was applied
  // Masked LM: no residue of the global batch was masked (likely only when
  // the samples hold few residues), so there was nothing to learn from: no
  // forward, no update; the schedule moves on. loss, accuracy and
  // grad_norm are NaN.
  bool no_targets = false;
  double seconds = 0;            // wall time of the step
  ModelTiming model;             // attention, scan, other compute
  double allreduce = 0;          // gradient and scalar allreduces (the gradient part may overlap the backward)
  double allreduce_exposed = 0;  // part of `allreduce` the step waited for after the backward
  bool allreduce_overlapped = false;
  double optimizer = 0;
  int64_t peak_bytes = 0;  // this rank's tracked peak during the step
};

struct EvalStats {
  double loss_sum = 0;
  int64_t tokens = 0;
  int64_t correct = 0;
  double loss() const { return tokens ? loss_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;
  double accuracy() const { return tokens ? static_cast<double>(correct) / static_cast<double>(tokens) : 0.0; }
};

// The step key of evaluation MLM masks (never reached by training).
constexpr int64_t kEvalMaskStep = int64_t{1} << 62;

class Trainer {
 public:
  Trainer(const ModelConfig& cfg, const OptimizerConfig& opt, ParallelGrid& grid, const ExecContext& ctx,
          AttentionOptions attention = {}, int64_t bucket_bytes = 16 << 20, bool overlap_allreduce = true);

  // One optimizer step on this rank's slice of the global batch.
  StepStats train_step(const TokenBatch& local);
  // Forward only; sums over the world. With `groups` ([B, n]: a group index
  // in [0, per_group->size()) per position, -1 for none) also the sums of
  // each group's predicted positions, added into *per_group (from the logits
  // on the host, in float64).
  EvalStats evaluate(const TokenBatch& local, const std::vector<int32_t>* groups = nullptr,
                     std::vector<EvalStats>* per_group = nullptr);
  // Sums this rank's contribution and that of the others (for several batches).
  EvalStats reduce(const EvalStats& local) const;

  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }
  // Whether the parameters and both moments hold only finite values (the same
  // answer on every rank; synchronises the stream).
  bool state_is_finite();
  PerformerModel& model() { return model_; }
  Tensor& moment1() { return m_; }
  Tensor& moment2() { return v_; }
  const OptimizerConfig& optimizer_config() const { return opt_; }
  LossScaler& loss_scaler() { return scaler_; }

 private:
  void apply_update(double lr, float grad_scale);

  OptimizerConfig opt_;
  ParallelGrid& grid_;
  ExecContext ctx_;
  PerformerModel model_;
  Tensor m_, v_;
  GradientAllreduce grad_allreduce_;
  LossScaler scaler_;
  int64_t step_ = 0;
};

}  // namespace pf
