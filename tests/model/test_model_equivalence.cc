// Rank invariance of the whole training step: the same model and global batch
// on sp = 1 (computed on every rank with a local communicator) and on the
// launched world split as dp x sp give the same loss (relative 1e-6), the same
// gradients (relative 1e-5) and the same parameters after three steps, with
// the MPI and the staged communicators, with and without a local softmax
// window across the ranks; and the overlapped gradient allreduce
// gives the bits of the deferred one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/packed_layout.h"
#include "model/planner.h"
#include "model/trainer.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "tests/model/model_fixtures.h"
#include "tests/model/plan_checks.h"
#include "tests/support/mpi_world.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

using test::world_size;

constexpr int64_t kSamples = 2;
constexpr int64_t kLength = 24;  // divisible by 1, 2, 3, 4
constexpr uint64_t kDataSeed = 5;

struct RunResult {
  std::vector<double> losses;
  std::vector<float> first_grads;
  std::vector<float> final_params;
};

RunResult train(const ModelConfig& cfg, ParallelGrid& grid, MemoryTracker& tracker, int steps,
                int64_t bucket_bytes = 16 << 20, bool overlap_allreduce = true, AttentionOptions attention = {},
                const HostStreamConfig& streams = host_streams_from_env()) {
  ExecResources res(Device::cpu(), tracker, streams);
  Trainer trainer(cfg, test::equivalence_optimizer(), grid, res.ctx(), attention, bucket_bytes, overlap_allreduce);
  const int64_t per_dp = kSamples / grid.dp_size();
  const int64_t n = kLength / grid.sp_size();
  const TokenBatch local = test::synthetic_slice(kDataSeed, grid.dp_rank() * per_dp, per_dp, kLength,
                                                 grid.sp_rank() * n, (grid.sp_rank() + 1) * n);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    r.losses.push_back(trainer.train_step(local).loss);
    if (s == 0) {
      const Tensor& g = trainer.model().grads();
      r.first_grads.assign(g.data<float>(), g.data<float>() + g.numel());
    }
  }
  const Tensor& p = trainer.model().params();
  r.final_params.assign(p.data<float>(), p.data<float>() + p.numel());
  return r;
}

void check_layout(AttentionKind kind, Objective obj, int sp,
                  std::unique_ptr<Communicator> world = make_mpi_comm(MPI_COMM_WORLD), int64_t window = 0) {
  ModelConfig cfg = test::tiny_config(kind, obj);
  cfg.window = window;
  MemoryTracker tracker(Device::cpu());
  ParallelGrid local(make_local_comm(), 1);
  const RunResult want = train(cfg, local, tracker, 3);
  const std::string backend = world->backend_name();
  ParallelGrid grid(std::move(world), sp);
  const RunResult got = train(cfg, grid, tracker, 3);
  const std::string what = std::string(attention_kind_name(kind)) + "/" + objective_name(obj) + " " + backend +
                           " dp=" + std::to_string(grid.dp_size()) + " sp=" + std::to_string(sp) +
                           " window=" + std::to_string(window);
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-6 * std::abs(want.losses[s])) << what << " step " << s;
  EXPECT_LT(test::rel_l2(got.first_grads, want.first_grads), 1e-5) << what;
  // Exact softmax attention is invariant to the key bias, whose gradient is
  // therefore zero up to rounding; Adam turns that rounding into lr-sized
  // steps of arbitrary sign, so parameters are compared for the kernels whose
  // every gradient is meaningful (loss and gradients are compared for all).
  if (kind != AttentionKind::Softmax) {
    EXPECT_LT(test::rel_l2(got.final_params, want.final_params), 1e-5) << what;
  }
}

TEST(ModelEquivalence, FavorCausalSequenceParallel) {
  check_layout(AttentionKind::Favor, Objective::CausalLM, world_size());
}
TEST(ModelEquivalence, FavorMaskedSequenceParallel) {
  check_layout(AttentionKind::Favor, Objective::MaskedLM, world_size());
}
TEST(ModelEquivalence, ReluCausalSequenceParallel) {
  check_layout(AttentionKind::Relu, Objective::CausalLM, world_size());
}
TEST(ModelEquivalence, ReluMaskedSequenceParallel) {
  check_layout(AttentionKind::Relu, Objective::MaskedLM, world_size());
}
TEST(ModelEquivalence, EluCausalSequenceParallel) {
  check_layout(AttentionKind::Elu, Objective::CausalLM, world_size());
}
TEST(ModelEquivalence, EluMaskedSequenceParallel) {
  check_layout(AttentionKind::Elu, Objective::MaskedLM, world_size());
}
TEST(ModelEquivalence, ExpCausalSequenceParallel) {
  check_layout(AttentionKind::Exp, Objective::CausalLM, world_size());
}
TEST(ModelEquivalence, ExpMaskedSequenceParallel) {
  check_layout(AttentionKind::Exp, Objective::MaskedLM, world_size());
}

// A local softmax window across the ranks (model/attention_window.cc): each
// rank takes the window - 1 rows of keys and values before its slice (and
// after, masked LM) from its neighbours and sends their gradients back.
// Window 7 reaches exactly one whole neighbouring slice at 4 ranks (6 rows
// each); windows 3 and 5 part of one. Beside FAVOR+ (gated) and alone.
TEST(ModelEquivalence, WindowBesideFavorSequenceParallel) {
  for (Objective obj : {Objective::CausalLM, Objective::MaskedLM})
    for (int64_t window : {int64_t{3}, int64_t{5}, int64_t{7}})
      check_layout(AttentionKind::Favor, obj, world_size(), make_mpi_comm(MPI_COMM_WORLD), window);
}
TEST(ModelEquivalence, WindowAloneSequenceParallel) {
  for (Objective obj : {Objective::CausalLM, Objective::MaskedLM})
    check_layout(AttentionKind::Softmax, obj, world_size(), make_mpi_comm(MPI_COMM_WORLD), 7);
}

// The memory plan of a rank whose local window takes halo rows from its
// neighbours (model/planner.cc, sp > 1) against the tracked peak of one
// training step: never below it and at most 5% above, for FAVOR+ beside a
// window of 64 and the window alone, causal and masked, and packed (four
// proteins a sample, which cross the ranks' edges at 2, 3 and 4 ranks).
TEST(ModelEquivalence, PlannerCountsTheWindowAcrossRanks) {
  const int sp = world_size();
  const int64_t L = 2048, n = L / sp, B = 2;
  for (bool packed : {false, true})
    for (AttentionKind kind : {AttentionKind::Favor, AttentionKind::Softmax})
      for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
        ModelConfig cfg = test::planner_config(kind, obj, false);
        cfg.window = 64;
        MemoryTracker tracker(Device::cpu());
        // Synchronous streams: on asynchronous ones the host runs ahead of the
        // kernels' scratch, and the tracked peak depends on how far.
        ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
        ParallelGrid grid(make_mpi_comm(MPI_COMM_WORLD), sp);
        Trainer trainer(cfg, OptimizerConfig{}, grid, res.ctx());
        TokenBatch local = test::synthetic_slice(kDataSeed, 0, B, L, grid.sp_rank() * n, (grid.sp_rank() + 1) * n);
        if (packed)
          for (int64_t b = 0; b < B; ++b) {
            SampleSequences sample;
            for (int64_t len : {300 + 100 * b, 800 - 100 * b, int64_t{400}, int64_t{548}})
              sample.add(len, static_cast<uint64_t>(10 * b + sample.count()));
            local.packed.samples.push_back(sample.pieces(grid.sp_rank() * n, (grid.sp_rank() + 1) * n));
          }
        test::expect_plan_bounds(plan_memory(cfg, B, n, true, Device::cpu(), packed, sp),
                                 trainer.train_step(local).peak_bytes, 0.05,
                                 std::string(packed ? "packed " : "") + attention_kind_name(kind) + "+window/" +
                                     objective_name(obj) + " sp=" + std::to_string(sp));
      }
}

// The staged communicator (device buffers through the host, MPI on its own
// stream; the backend that lets several ranks share one GPU) on CPU buffers:
// the same results as sp = 1, in the stream mode PF_CPU_STREAMS gives.
TEST(ModelEquivalence, StagedCommunicatorSequenceParallel) {
  for (Objective obj : {Objective::CausalLM, Objective::MaskedLM})
    check_layout(AttentionKind::Favor, obj, world_size(),
                 make_staged_comm(MPI_COMM_WORLD, Device::cpu(), host_streams_from_env()));
  if (world_size() == 4)
    check_layout(AttentionKind::Favor, Objective::CausalLM, 2,
                 make_staged_comm(MPI_COMM_WORLD, Device::cpu(), host_streams_from_env()));
  check_layout(AttentionKind::Favor, Objective::MaskedLM, world_size(),
               make_staged_comm(MPI_COMM_WORLD, Device::cpu(), host_streams_from_env()), 5);
}

TEST(ModelEquivalence, DataTimesSequenceParallel) {
  if (world_size() != 4) GTEST_SKIP() << "the 2 x 2 layout needs 4 ranks";
  check_layout(AttentionKind::Favor, Objective::CausalLM, 2);
  check_layout(AttentionKind::Favor, Objective::MaskedLM, 2);
}

// The gradient allreduce overlapped with the backward (small buckets, so each
// layer is cut into several) against the same buckets summed after it: the
// same bits in losses and parameters.
TEST(ModelEquivalence, OverlappedGradientAllreduceGivesTheSameBits) {
  const int P = world_size();
  if (P != 2 && P != 4) GTEST_SKIP() << "needs dp = 2 (2 or 4 ranks)";
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  MemoryTracker tracker(Device::cpu());
  ParallelGrid grid(make_mpi_comm(MPI_COMM_WORLD), P / 2);
  const RunResult overlapped = train(cfg, grid, tracker, 3, 4096, true);
  const RunResult after = train(cfg, grid, tracker, 3, 4096, false);
  EXPECT_EQ(overlapped.losses, after.losses);
  EXPECT_EQ(overlapped.first_grads, after.first_grads);
  EXPECT_EQ(overlapped.final_params, after.final_params);
}

TEST(ModelEquivalence, DataParallelOnly) {
  if (world_size() != 2) GTEST_SKIP() << "the 2 x 1 layout needs 2 ranks";
  check_layout(AttentionKind::Favor, Objective::CausalLM, 1);
  check_layout(AttentionKind::Softmax, Objective::CausalLM, 1);
}

// The asynchronous CPU streams run the same kernels in the same order on each
// stream, so they must give the bits of the synchronous ones: sp = P, and
// dp x sp = 2 x 2 with the gradient allreduce overlapped (4 ranks).
TEST(AsyncStreams, GiveTheBitsOfSyncStreams) {
  const int P = world_size();
  const HostStreamConfig sync = parse_host_streams("sync");
  const HostStreamConfig async = parse_host_streams("async+jitter=5");
  for (int sp : {P, P == 4 ? 2 : 0}) {
    if (sp == 0) continue;
    for (Objective obj : {Objective::CausalLM, Objective::MaskedLM}) {
      const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, obj);
      MemoryTracker tracker(Device::cpu());
      ParallelGrid grid_sync(make_mpi_comm(MPI_COMM_WORLD, sync), sp);
      const RunResult a = train(cfg, grid_sync, tracker, 3, 4096, true, {}, sync);
      ParallelGrid grid_async(make_mpi_comm(MPI_COMM_WORLD, async), sp);
      const RunResult b = train(cfg, grid_async, tracker, 3, 4096, true, {}, async);
      const std::string what = std::string(objective_name(obj)) + " sp=" + std::to_string(sp);
      EXPECT_EQ(a.losses, b.losses) << what;
      EXPECT_EQ(a.first_grads, b.first_grads) << what;
      EXPECT_EQ(a.final_params, b.final_params) << what;
    }
  }
}

// Proof that the asynchronous CPU streams see what they are for: the same
// sequence-parallel run with the compute stream's wait for the forward scan
// left out (a test-only switch) is caught in async+jitter mode (new memory is
// NaN there, and the scan is delayed), while the run with the wait matches
// sp = 1. Runs in async+jitter mode whatever PF_CPU_STREAMS says.
TEST(AsyncStreams, DetectAMissingWaitForTheForwardScan) {
  const int P = world_size();
  if (P < 2) GTEST_SKIP() << "the forward scan needs a sequence group of 2 or more ranks";
  const HostStreamConfig streams = parse_host_streams("async+jitter=11");
  const ModelConfig cfg = test::tiny_config(AttentionKind::Favor, Objective::CausalLM);
  MemoryTracker tracker(Device::cpu());
  ParallelGrid local(make_local_comm(), 1);
  const RunResult want = train(cfg, local, tracker, 1, 16 << 20, true, {}, streams);
  ParallelGrid grid(make_mpi_comm(MPI_COMM_WORLD, streams), P);
  auto matches = [&](const RunResult& got) {
    return std::abs(got.losses[0] - want.losses[0]) <= 1e-6 * std::abs(want.losses[0]) &&
           test::rel_l2(got.first_grads, want.first_grads) < 1e-5;
  };
  EXPECT_TRUE(matches(train(cfg, grid, tracker, 1, 16 << 20, true, {}, streams))) << "with the wait";
  AttentionOptions omit;
  omit.test_omit_scan_wait = true;
  // The scan is issued after the local chunks, so the compute stream's next
  // kernel is the one that needs its result: without the wait it runs while
  // the scan is still on the communicator's stream (with the scan issued
  // first, it could finish during the chunks and hide the missing wait).
  omit.overlap_comm = false;
  int caught = 0;
  for (int attempt = 0; attempt < 3; ++attempt)
    caught += !matches(train(cfg, grid, tracker, 1, 16 << 20, true, omit, streams));
  int caught_anywhere = 0;
  MPI_Allreduce(&caught, &caught_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_GT(caught_anywhere, 0) << "3 runs without the wait all matched: the async mode did not see it";
}

}  // namespace
}  // namespace pf
