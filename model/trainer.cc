#include "model/trainer.h"

#include <algorithm>
#include <cmath>

#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/reduce/reduce.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf {

double EvalStats::perplexity() const { return std::exp(loss()); }

Trainer::Trainer(const ModelConfig& cfg, const OptimizerConfig& opt, ParallelGrid& grid, const ExecContext& ctx,
                 AttentionOptions attention, int64_t bucket_bytes, bool overlap_allreduce)
    : opt_(opt),
      grid_(grid),
      ctx_(ctx),
      model_(cfg, ctx, grid.sp_size() > 1 ? &grid.sp_group() : nullptr, attention),
      grad_allreduce_(grid.world(), std::max<int64_t>(1, bucket_bytes / 4), overlap_allreduce),
      scaler_(opt.loss_scale, cfg.dtype) {
  m_ = Tensor::zeros({model_.layout().total()}, DType::f32, *ctx.tracker, "optimizer.m");
  v_ = Tensor::zeros({model_.layout().total()}, DType::f32, *ctx.tracker, "optimizer.v");
}

void Trainer::apply_update(double lr, float grad_scale) {
  AdamWConfig c = opt_.adamw;
  c.lr = static_cast<float>(lr);
  float* p = model_.params().data<float>();
  const float* g = model_.grads().data<float>();
  float* m = m_.data<float>();
  float* v = v_.data<float>();
  for (const ParamSlice& s : model_.layout().slices()) {
    AdamWConfig cs = c;
    if (!s.decay) cs.weight_decay = 0.f;
    adamw_update(ctx_, p + s.offset, g + s.offset, m + s.offset, v + s.offset, s.numel, step_ + 1, cs, grad_scale);
  }
}

StepStats Trainer::train_step(const TokenBatch& local) {
  const double t0 = seconds_now();
  ctx_.tracker->reset_peak();
  StepStats st;
  st.step = step_;
  const ModelInput in = make_model_input(model_.config(), local, step_);
  Communicator& world = grid_.world();

  double ta = seconds_now();
  int64_t global_count = in.predicted();
  allreduce_host_values(world, &global_count, 1, DType::i64, ReduceOp::Sum, *ctx_.tracker);
  st.allreduce += seconds_now() - ta;
  if (global_count == 0) {
    PF_REQUIRE(DataError, model_.config().objective == Objective::MaskedLM,
               "step " << step_ + 1 << ": the global batch has no token to predict (every position is padding)");
    st.no_targets = true;
    st.lr = learning_rate_at(opt_.schedule, step_);
    st.loss_scale = scaler_.scale();
    st.loss = st.accuracy = st.grad_norm = std::nan("");
    st.peak_bytes = ctx_.tracker->stats().peak_bytes;
    st.seconds = seconds_now() - t0;
    ++step_;
    return st;
  }

  model_.zero_grads();
  grad_allreduce_.begin(ctx_.stream, model_.grads().data<float>(), model_.layout().total());
  st.loss_scale = scaler_.scale();
  const ForwardResult fr = model_.forward_backward(in, step_, st.loss_scale / static_cast<double>(global_count),
                                                   &st.model, [this](int64_t from) { grad_allreduce_.ready(from); });
  const GradientAllreduceTiming gt = grad_allreduce_.finish();

  ta = seconds_now();
  double sums[2] = {fr.loss_sum, static_cast<double>(fr.correct)};
  allreduce_host_values(world, sums, 2, DType::f64, ReduceOp::Sum, *ctx_.tracker);
  const double scalars = seconds_now() - ta;
  st.allreduce += gt.busy + scalars;
  st.allreduce_exposed = gt.exposed + scalars;
  st.allreduce_overlapped = gt.overlapped;

  const double to = seconds_now();
  // Every rank holds the same summed gradients, so every rank decides alike.
  const double ss = sum_of_squares(ctx_, model_.grads().data<float>(), model_.layout().total());
  st.lr = learning_rate_at(opt_.schedule, step_);
  st.skipped = !scaler_.update(std::isfinite(ss));
  if (st.skipped) {
    st.grad_norm = std::nan("");
  } else {
    st.grad_norm = std::sqrt(ss) / st.loss_scale;
    const double clip = clip_coefficient(st.grad_norm, opt_.clip_norm);
    apply_update(st.lr, static_cast<float>(clip / st.loss_scale));
  }
  synchronize(ctx_.stream);
  st.optimizer = seconds_now() - to;

  st.tokens = global_count;
  st.loss = sums[0] / static_cast<double>(global_count);
  st.accuracy = sums[1] / static_cast<double>(global_count);
  st.peak_bytes = ctx_.tracker->stats().peak_bytes;
  st.seconds = seconds_now() - t0;
  ++step_;
  return st;
}

bool Trainer::state_is_finite() {
  const int64_t n = model_.layout().total();
  for (const Tensor* t : {&model_.params(), &m_, &v_})
    if (!std::isfinite(sum_of_squares(ctx_, t->data<float>(), n))) return false;
  return true;
}

EvalStats Trainer::evaluate(const TokenBatch& local, const std::vector<int32_t>* groups,
                            std::vector<EvalStats>* per_group) {
  // MLM masks of evaluations are keyed by a fixed step, so every evaluation of
  // every checkpoint scores the same positions.
  const ModelInput in = make_model_input(model_.config(), local, kEvalMaskStep);
  if (!groups) {
    const ForwardResult fr = model_.forward(in, step_);
    return reduce(EvalStats{fr.loss_sum, fr.count, fr.correct});
  }
  PF_REQUIRE(ValueError, per_group != nullptr && groups->size() == in.targets.size(),
             "evaluation groups: " << groups->size() << " entries for " << in.targets.size() << " positions");
  const int64_t V = model_.config().vocab, G = static_cast<int64_t>(per_group->size());
  for (int32_t g : *groups)
    PF_REQUIRE(ValueError, g >= -1 && g < G, "evaluation group " << g << " outside [-1, " << G << ")");
  std::vector<float> logits;
  const ForwardResult fr = model_.forward(in, step_, &logits);
  std::vector<double> sums(static_cast<size_t>(3 * G + 3), 0.0);
  sums[0] = fr.loss_sum;
  sums[1] = static_cast<double>(fr.count);
  sums[2] = static_cast<double>(fr.correct);
  for (size_t t = 0; t < in.targets.size(); ++t) {
    const int32_t g = (*groups)[t], y = in.targets[t];
    if (g < 0 || y < 0) continue;
    const float* row = logits.data() + t * static_cast<size_t>(V);
    const int64_t best = std::max_element(row, row + V) - row;
    sums[static_cast<size_t>(3 + 3 * g)] -= log_softmax_at(row, V, y);
    sums[static_cast<size_t>(4 + 3 * g)] += 1;
    sums[static_cast<size_t>(5 + 3 * g)] += best == y;
  }
  allreduce_host_values(grid_.world(), sums.data(), 3 * G + 3, DType::f64, ReduceOp::Sum, *ctx_.tracker);
  for (int64_t g = 0; g < G; ++g) {
    EvalStats& e = (*per_group)[static_cast<size_t>(g)];
    e.loss_sum += sums[static_cast<size_t>(3 + 3 * g)];
    e.tokens += std::llround(sums[static_cast<size_t>(4 + 3 * g)]);
    e.correct += std::llround(sums[static_cast<size_t>(5 + 3 * g)]);
  }
  return EvalStats{sums[0], std::llround(sums[1]), std::llround(sums[2])};
}

EvalStats Trainer::reduce(const EvalStats& local) const {
  double v[3] = {local.loss_sum, static_cast<double>(local.tokens), static_cast<double>(local.correct)};
  allreduce_host_values(grid_.world(), v, 3, DType::f64, ReduceOp::Sum, *ctx_.tracker);
  return EvalStats{v[0], static_cast<int64_t>(std::llround(v[1])), static_cast<int64_t>(std::llround(v[2]))};
}

}  // namespace pf
