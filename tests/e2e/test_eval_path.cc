// The evaluation path of performer-eval, in process under mpirun: a tiny model
// trained for a few steps, then its checkpoint evaluated on the test split with
// restore_checkpoint / load_parameters + run_validation, against a reference
// that reads the split straight from the HDF5 file, builds the concat samples
// and targets itself, runs the model forward on the whole sequence (one rank,
// no loader) and computes the mean cross-entropy and top-1 accuracy from the
// logits in float64. Both objectives (the MLM masks are the library's fixed
// evaluation masks, make_model_input at kEvalMaskStep). Also: another
// attention kind or feature draw (model.feature_draw) at evaluation,
// checkpoint.init_from, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "data/h5.h"
#include "data/vocab.h"
#include "launch/core/checkpoint.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/session.h"
#include "launch/train/train_loop.h"
#include "model/params.h"
#include "tests/e2e/train_fixtures.h"
#include "tests/support/mpi_world.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

using test::set_override;
using test::set_overrides;

using test::world_rank;
using test::world_size;

struct Reference {
  double loss_sum = 0;
  int64_t tokens = 0, correct = 0;
};

// The concat stream of a split: every sequence followed by <end>.
std::vector<int32_t> split_stream(const std::string& file, const std::string& split) {
  H5Id f = h5_open_file(file);
  H5Id g = h5_open_group(f, split);
  const auto tokens = h5_read_array<uint8_t>(g, "tokens");
  const auto offsets = h5_read_array<int64_t>(g, "offsets");
  std::vector<int32_t> stream;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    for (int64_t t = offsets[i]; t < offsets[i + 1]; ++t) stream.push_back(tokens[static_cast<size_t>(t)]);
    stream.push_back(Vocab::kEnd);
  }
  return stream;
}

// Loss, count and top-1 hits of `model_cfg` with `params` on every concat
// sample of `split`, one sample at a time on the whole sequence.
Reference reference_eval(const ModelConfig& model_cfg, const std::vector<float>& params, int64_t step,
                         const std::string& file, const std::string& split, int64_t L, const ExecContext& ctx) {
  PerformerModel model(model_cfg, ctx, nullptr);
  copy_bytes_blocking(model.params().raw(), model.params().device(), params.data(), Device::cpu(),
                      model.params().nbytes());
  const std::vector<int32_t> stream = split_stream(file, split);
  const int64_t V = model_cfg.vocab;
  Reference r;
  for (int64_t s = 0; (s + 1) * L <= static_cast<int64_t>(stream.size()); ++s) {
    TokenBatch b;
    b.batch = 1;
    b.n = L;
    b.tokens.assign(stream.begin() + s * L, stream.begin() + (s + 1) * L);
    b.lookahead = {-1};
    b.sample_ids = {static_cast<uint64_t>(s)};
    ModelInput in;
    if (model_cfg.objective == Objective::CausalLM) {
      // Next token inside the sample; the last position predicts nothing.
      in.batch = 1;
      in.n = L;
      in.inputs = b.tokens;
      in.targets.assign(static_cast<size_t>(L), -1);
      for (int64_t i = 0; i + 1 < L; ++i) in.targets[static_cast<size_t>(i)] = b.tokens[static_cast<size_t>(i + 1)];
    } else {
      in = make_model_input(model_cfg, b, kEvalMaskStep);
    }
    std::vector<float> logits;
    model.forward(in, step, &logits);
    for (int64_t i = 0; i < L; ++i) {
      const int32_t t = in.targets[static_cast<size_t>(i)];
      if (t < 0) continue;
      const float* z = logits.data() + i * V;
      double mx = z[0];
      int64_t arg = 0;
      for (int64_t v = 1; v < V; ++v)
        if (z[v] > mx) mx = z[v], arg = v;
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[v]) - mx);
      r.loss_sum += mx + std::log(sum) - z[t];
      r.tokens += 1;
      r.correct += arg == t;
    }
  }
  return r;
}

class EvalPath : public ::testing::TestWithParam<const char*> {
 protected:
  // Trains the tiny model of this objective for 8 steps (once per process and
  // objective) and returns its overrides.
  std::vector<std::string> trained(const std::string& tag, const std::vector<std::string>& extra = {}) {
    const std::string root = test::shared_temp_dir(MPI_COMM_WORLD, "evalpath-" + tag);
    const std::string data = test::prepared_proteins(MPI_COMM_WORLD, root);
    std::vector<std::string> o = test::tiny_run(data, root, world_size(), 4);
    set_override(o, std::string("model.objective=\"") + GetParam() + "\"");
    set_overrides(o, extra);
    const TrainConfig cfg = load_train_config("", o);
    Session session(cfg, MPI_COMM_WORLD);
    std::ostringstream log;
    const TrainOutcome out = run_training(cfg, session, log);
    EXPECT_EQ(out.last_step, 8);
    checkpoint_ = out.checkpoint;
    data_ = data;
    return o;
  }
  static TrainConfig eval_config(std::vector<std::string> o, const std::vector<std::string>& extra = {}) {
    set_override(o, "data.valid_split=\"test\"");
    set_override(o, "train.eval_batches=0");
    set_overrides(o, extra);
    return load_train_config("", o);
  }
  std::string checkpoint_, data_;
};

void expect_matches(const EvalStats& e, const Reference& r) {
  ASSERT_GT(r.tokens, 100);
  EXPECT_EQ(e.tokens, r.tokens);
  const double ref_loss = r.loss_sum / static_cast<double>(r.tokens);
  EXPECT_NEAR(e.loss(), ref_loss, 2e-5 * ref_loss);
  EXPECT_NEAR(e.perplexity(), std::exp(ref_loss), 2e-5 * std::exp(ref_loss));
  // Top-1 hits may only differ at a near tie of two logits (different batching).
  EXPECT_NEAR(static_cast<double>(e.correct), static_cast<double>(r.correct), 1.0);
  EXPECT_NEAR(e.accuracy(), static_cast<double>(r.correct) / static_cast<double>(r.tokens),
              1.0 / static_cast<double>(r.tokens));
}

TEST_P(EvalPath, CheckpointLossPerplexityAccuracyMatchAReference) {
  const std::vector<std::string> o = trained("ref");
  const TrainConfig cfg = eval_config(o);
  Session session(cfg, MPI_COMM_WORLD);
  Trainer trainer(cfg.model, cfg.optimizer, session.grid(), session.ctx(), cfg.parallel.attention);
  restore_checkpoint(checkpoint_, cfg, trainer);
  EXPECT_EQ(trainer.step(), 8);
  const EvalStats e = run_validation(cfg, session, trainer);
  const CheckpointState st = open_checkpoint(checkpoint_).read_state(ParamLayout(cfg.model));
  const Reference r = reference_eval(cfg.model, st.params, 8, data_, "test", cfg.data.sample_length, session.ctx());
  expect_matches(e, r);
  // A trained model beats chance over 29 tokens.
  EXPECT_LT(e.perplexity(), 29.0);

  // load_parameters (performer-eval) gives the same numbers on the same model.
  Trainer again(cfg.model, cfg.optimizer, session.grid(), session.ctx(), cfg.parallel.attention);
  EXPECT_EQ(load_parameters(open_checkpoint(checkpoint_), cfg, again), 8);
  const EvalStats e2 = run_validation(cfg, session, again);
  EXPECT_EQ(e2.loss_sum, e.loss_sum);
  EXPECT_EQ(e2.correct, e.correct);
}

// Packed evaluation gives what one protein per sample gives (causal: the
// padding after a protein in single mode changes nothing there; in masked LM
// single mode's padding is attended to, so only the packed form is each
// protein alone, which tests/model/test_packed_model.cc checks), overall and
// per protein length; concat mode refuses the per-length sums.
TEST_P(EvalPath, PackedEvaluationEqualsOneProteinPerSample) {
  if (std::string(GetParam()) != "clm") GTEST_SKIP() << "single mode attends to its padding in masked LM";
  const std::vector<std::string> o = trained("packed");
  std::vector<EvalStats> results, packed_len, single_len;
  for (const char* mode : {"packed", "single"}) {
    const TrainConfig cfg = eval_config(o, {std::string("data.mode=\"") + mode + "\"", "data.sample_length=960"});
    Session session(cfg, MPI_COMM_WORLD);
    Trainer trainer(cfg.model, cfg.optimizer, session.grid(), session.ctx(), cfg.parallel.attention);
    load_parameters(open_checkpoint(checkpoint_), cfg, trainer);
    results.push_back(run_validation(cfg, session, trainer, mode[0] == 'p' ? &packed_len : &single_len));
  }
  ASSERT_GT(results[0].tokens, 1000);
  EXPECT_EQ(results[0].tokens, results[1].tokens);
  EXPECT_NEAR(results[0].loss_sum, results[1].loss_sum, 1e-5 * results[1].loss_sum);
  ASSERT_EQ(packed_len.size(), static_cast<size_t>(kLengthBuckets));
  int64_t tokens = 0;
  for (int b = 0; b < kLengthBuckets; ++b) {
    EXPECT_EQ(packed_len[b].tokens, single_len[b].tokens) << "bucket " << b;
    EXPECT_NEAR(packed_len[b].loss_sum, single_len[b].loss_sum, 1e-5 * single_len[b].loss_sum + 1e-9) << b;
    tokens += packed_len[b].tokens;
  }
  EXPECT_EQ(tokens, results[0].tokens);
  EXPECT_GT(packed_len[1].tokens, 0) << "the test split should hold proteins of 1,025-8,192 residues";
  EXPECT_EQ(length_bucket(1024), 0);
  EXPECT_EQ(length_bucket(1025), 1);
  EXPECT_EQ(length_bucket(8192), 1);
  EXPECT_EQ(length_bucket(8193), 2);
  const TrainConfig concat = eval_config(o, {"data.mode=\"concat\""});
  Session session(concat, MPI_COMM_WORLD);
  Trainer trainer(concat.model, concat.optimizer, session.grid(), session.ctx(), concat.parallel.attention);
  std::vector<EvalStats> by_length;
  EXPECT_THROW(run_validation(concat, session, trainer, &by_length), ConfigError);
}

TEST_P(EvalPath, OtherAttentionAndFeatureDrawsAtEvaluation) {
  const std::vector<std::string> o = trained("swap");
  const ParamLayout stored(load_train_config("", o).model);
  const CheckpointState st = open_checkpoint(checkpoint_).read_state(stored);
  std::vector<double> losses;
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{"model.feature_draw=1"},
                                             {"model.feature_draw=2", "model.features=32"},
                                             {"model.attention=\"exp\"", "model.exp_key_norm=true"},
                                             {"model.attention=\"softmax\"", "parallel.sp=1"}}) {
    if (extra.back() == "parallel.sp=1" && world_size() != 1) continue;  // softmax needs the whole sequence
    const TrainConfig cfg = eval_config(o, extra);
    Session session(cfg, MPI_COMM_WORLD);
    Trainer trainer(cfg.model, cfg.optimizer, session.grid(), session.ctx(), cfg.parallel.attention);
    EXPECT_THROW(restore_checkpoint(checkpoint_, cfg, trainer), ConfigError);  // resume stays strict
    std::vector<std::string> fresh;
    load_parameters(open_checkpoint(checkpoint_), cfg, trainer, &fresh);
    // exp's projections are parameters the FAVOR+ checkpoint lacks: they
    // start as FAVOR+'s draw, and every other tensor is the checkpoint's.
    const bool exp = cfg.model.attention == AttentionKind::Exp;
    EXPECT_EQ(fresh.size(), exp ? static_cast<size_t>(cfg.model.layers) : 0u);
    if (exp) {
      EXPECT_EQ(fresh_parameters_text(fresh), "attn.features of layer(s) 0, 1");
    }
    const std::vector<float> params = carry_parameters(cfg.model, ParamLayout(cfg.model), stored, st.params);
    const EvalStats e = run_validation(cfg, session, trainer);
    expect_matches(e, reference_eval(cfg.model, params, 8, data_, "test", cfg.data.sample_length, session.ctx()));
    losses.push_back(e.loss());
  }
  // Draw 1 is not draw 0: the numbers differ from the training draw.
  const TrainConfig base = eval_config(o);
  Session session(base, MPI_COMM_WORLD);
  Trainer trainer(base.model, base.optimizer, session.grid(), session.ctx(), base.parallel.attention);
  load_parameters(open_checkpoint(checkpoint_), base, trainer);
  const double base_loss = run_validation(base, session, trainer).loss();
  EXPECT_NE(base_loss, losses.at(0));
  // exp with the key norm and its projections at FAVOR+'s draw 0 is the
  // FAVOR+ model the checkpoint was trained as.
  EXPECT_NEAR(losses.at(2), base_loss, 1e-6 * base_loss);

  // Keys that change the parameters are refused even for evaluation.
  const TrainConfig wide = eval_config(o, {"model.ffn=128"});
  Session s2(wide, MPI_COMM_WORLD);
  Trainer t2(wide.model, wide.optimizer, s2.grid(), s2.ctx(), wide.parallel.attention);
  try {
    load_parameters(open_checkpoint(checkpoint_), wide, t2);
    ADD_FAILURE() << "a checkpoint of another ffn width was loaded";
  } catch (const ConfigError& e) {  // compared before any tensor is read
    EXPECT_NE(std::string(e.what()).find("model.ffn"), std::string::npos) << e.what();
  }
  const TrainConfig seeded = eval_config(o, {"model.seed=99"});
  Trainer t3(seeded.model, seeded.optimizer, s2.grid(), s2.ctx(), seeded.parallel.attention);
  EXPECT_THROW(load_parameters(open_checkpoint(checkpoint_), seeded, t3), ConfigError);
}

TEST_P(EvalPath, InitFromStartsAFreshRunFromTheParameters) {
  const std::vector<std::string> o = trained("init");
  const std::string source = checkpoint_;
  // Other random features, a vanishing learning rate (lr must be > 0): the run
  // starts at step 0 and ends with the source parameters (to float rounding),
  // far from a fresh initialisation.
  std::vector<std::string> ft = o;
  const std::string dir = std::filesystem::path(source).parent_path().parent_path().string() + "/ft";
  for (const std::string& k :
       {std::string("checkpoint.init_from=\"") + source + "\"", std::string("checkpoint.dir=\"") + dir + "\"",
        std::string("train.metrics=\"") + dir + "/metrics.jsonl\"", std::string("model.features=32"),
        std::string("train.steps=3"), std::string("optimizer.lr=1e-30"), std::string("optimizer.min_lr=0")})
    set_override(ft, k);
  const TrainConfig cfg = load_train_config("", ft);
  Session session(cfg, MPI_COMM_WORLD);
  std::ostringstream log;
  const TrainOutcome out = run_training(cfg, session, log);
  EXPECT_EQ(out.first_step, 0);
  EXPECT_EQ(out.last_step, 3);
  const ParamLayout layout(cfg.model);
  const std::vector<float> src = open_checkpoint(source).read_state(layout).params;
  EXPECT_LT(test::rel_l2(open_checkpoint(out.checkpoint).read_state(layout).params, src), 1e-6);
  // The same run without init_from starts from model.seed's initialisation.
  std::vector<std::string> fresh = ft;
  fresh.erase(std::find(fresh.begin(), fresh.end(), std::string("checkpoint.init_from=\"") + source + "\""));
  set_override(fresh, "checkpoint.dir=\"" + dir + "-fresh\"");
  set_override(fresh, "train.metrics=\"\"");
  const TrainConfig fresh_cfg = load_train_config("", fresh);
  Session fresh_session(fresh_cfg, MPI_COMM_WORLD);
  const TrainOutcome fresh_out = run_training(fresh_cfg, fresh_session, log);
  EXPECT_EQ(fresh_out.checkpoint, checkpoint_path(dir + "-fresh", 3));
  EXPECT_GT(test::rel_l2(open_checkpoint(fresh_out.checkpoint).read_state(layout).params, src), 0.01);
  // Steps of the fine-tune are counted from 0 in its metrics (written by rank 0).
  if (world_rank() == 0) {
    EXPECT_EQ(test::metric_losses(dir + "/metrics.jsonl").size(), 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(Objectives, EvalPath, ::testing::Values("clm", "mlm"));

}  // namespace
}  // namespace pf
