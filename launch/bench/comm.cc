// performer-bench comm: latency and bandwidth of the distributed scans (each
// algorithm, forward and reverse), allreduce and allgather, at the launched
// rank count, over message sizes from --min-bytes to --max-bytes (per rank).
//   mpirun -np 4 performer-bench comm [--backend mpi|nccl] [--csv FILE]
// One row per (op, algorithm, direction, bytes): the best and the median over
// the repetitions of the slowest rank's time (each run starts after a
// barrier), and the algorithm bandwidth bytes / median (nccl-tests' algbw,
// bytes per rank). Rows "segmented_scan": whole values of --segment-granule
// floats with their flags through the segmented combine, beside rows
// "plain_scan_same_bytes" (the sum scan of the same bytes), for its cost.
// Rows "state_scan" and "segmented_state_scan": the model's own scan
// operators (kernels/linear_attention/state_scan_combine.h) on FAVOR+ states
// of --state-features x --state-head-dim, the log-scale combine and its fused
// segmented form with every flag 0 (so each combine computes), the same
// states.
// Rank 0 writes the CSV.
#include "runtime/comm.h"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/linear_attention/state_scan_combine.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/timing.h"
#include "launch/core/mpi_program.h"
#include "runtime/check.h"
#include "runtime/comm_mpi.h"
#include "runtime/memory.h"
#include "runtime/scan.h"

namespace pf::bench {
namespace {

// The elementwise sum seen as values of `granule` elements, the shape of a
// linear-attention state, for the segmented scan rows.
class GranuleSum final : public ScanCombine {
 public:
  GranuleSum(const ScanCombine& sum, int64_t granule) : sum_(sum), granule_(granule) {}
  DType dtype() const override { return sum_.dtype(); }
  Device device() const override { return sum_.device(); }
  int64_t granule() const override { return granule_; }
  const char* name() const override { return "sum"; }
  void fill_identity(void* out, int64_t count, const Stream& stream) const override {
    sum_.fill_identity(out, count, stream);
  }
  void combine(const void* earlier, const void* later, void* out, int64_t count, const Stream& stream) const override {
    sum_.combine(earlier, later, out, count, stream);
  }

 private:
  const ScanCombine& sum_;
  int64_t granule_;
};

// A buffer of `bytes` on the communicator's device, filled with 1.0f.
// refill() writes it again, as a freshly computed block would be (sending
// data untouched since the last send is faster than sending new data).
class BenchBuffer {
 public:
  // Filled with 1.0f, or with `pattern` (bytes / 4 floats) when given.
  BenchBuffer(MemoryTracker& tracker, int64_t bytes, std::vector<float> pattern = {})
      : tracker_(tracker),
        bytes_(std::max<int64_t>(bytes, 4)),
        ones_(pattern.empty() ? std::vector<float>(static_cast<size_t>(bytes_ / 4), 1.0f) : std::move(pattern)) {
    ptr_ = device_allocate(tracker_, bytes_, "bench buffer");
    refill();
  }
  void refill() { copy_bytes_blocking(ptr_, tracker_.device(), ones_.data(), Device::cpu(), bytes_); }
  ~BenchBuffer() { device_free(tracker_, ptr_, bytes_, "bench buffer"); }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  MemoryTracker& tracker_;
  int64_t bytes_;
  std::vector<float> ones_;
  void* ptr_;
};

struct Timing {
  double best = 0;    // fastest run
  double median = 0;  // typical run (oversubscribed ranks make the spread wide)
};

// The slowest rank's time for `op`, over `reps` runs after one warm-up.
// `prepare` runs untimed before each run.
Timing time_collective(Communicator& comm, const std::function<void()>& prepare, const std::function<void()>& op,
                       int reps) {
  std::vector<double> runs;
  for (int r = 0; r <= reps; ++r) {
    prepare();
    synchronize(comm.stream());
    comm.barrier();
    const double t0 = seconds_now();
    op();
    synchronize(comm.stream());
    double t = seconds_now() - t0, slowest = 0;
    PF_MPI_CHECK(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    if (r > 0) runs.push_back(slowest);
  }
  std::sort(runs.begin(), runs.end());
  return Timing{runs.front(), runs[runs.size() / 2]};
}

int run_comm_ranks(int argc, char** argv) {
  CLI::App app{"latency and bandwidth of scans, allreduce and allgather (run under mpirun)"};
  std::string backend = "mpi", csv_path;
  int64_t min_bytes = 4 << 10, max_bytes = 64 << 20, max_gather_bytes = 256 << 20, segment_bytes = 1 << 20,
          segment_granule = 1 + 256 * 65, state_m = 256, state_d = 64;
  int factor = 4, max_reps = 30;
  app.add_option("--backend", backend, "mpi (host buffers) or nccl (device buffers)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("--min-bytes", min_bytes, "smallest message per rank")->check(pf::positive_number());
  app.add_option("--max-bytes", max_bytes, "largest message per rank")->check(pf::positive_number());
  app.add_option("--factor", factor, "size step (multiplier)")->check(CLI::Range(2, 1024));
  app.add_option("--max-gather-bytes", max_gather_bytes,
                 "skip allgather-based ops whose gathered buffer (ranks x bytes) would pass this")
      ->check(pf::positive_number());
  app.add_option("--segment-bytes", segment_bytes, "pipeline segment of the chain scan")->check(pf::positive_number());
  app.add_option("--reps", max_reps, "timed repetitions for the smallest messages (fewer for large ones)")
      ->check(pf::positive_number());
  app.add_option("--csv", csv_path, "write the CSV here instead of stdout");
  app.add_option("--segment-granule", segment_granule,
                 "values per flag of the segmented scan rows (default: one FAVOR+ state of the paper preset, "
                 "1 + 256 x 65 floats); sizes below one value are skipped")
      ->check(pf::positive_number());
  app.add_option("--state-features", state_m, "m of the state scan rows (default 256, the paper preset)")
      ->check(pf::positive_number());
  app.add_option("--state-head-dim", state_d, "head dim d of the state scan rows (default 64)")
      ->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  auto comm = backend == "nccl" ? make_nccl_comm(MPI_COMM_WORLD) : make_mpi_comm(MPI_COMM_WORLD);
  const int rank = comm->rank(), ranks = comm->size();
  MemoryTracker tracker(comm->device());
  ScanWorkspace workspace(tracker);  // as the trainer does: scratch kept between scans
  auto sum = make_sum_combine(DType::f32, comm->device());
  const GranuleSum state_sum(*sum, segment_granule);
  ScanWorkspace segment_scratch(tracker);
  const auto segmented = make_segmented_combine(state_sum, segment_scratch);
  ExecContext state_ctx;
  state_ctx.device = comm->device();
  state_ctx.stream = comm->stream();
  state_ctx.tracker = &tracker;
  const StateCombine state_combine(state_ctx, state_m, state_d);
  const SegmentedStateCombine segmented_state_combine(state_ctx, state_m, state_d);

  // The scan options of one timed call.
  auto scan_options = [&](ScanAlgorithm algorithm, ScanDirection direction = ScanDirection::Forward) {
    ScanOptions options;
    options.algorithm = algorithm;
    options.direction = direction;
    options.chain_segment_bytes = segment_bytes;
    options.workspace = &workspace;
    return options;
  };

  CsvOutput csv_out(csv_path, "backend,ranks,op,algorithm,direction,bytes,dtype,reps,best_us,median_us,algbw_GBps\n",
                    rank == 0);
  FILE* out = csv_out.file();

  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    const int64_t count = bytes / 4;
    const int reps = static_cast<int>(std::clamp<int64_t>((int64_t{8} << 20) / bytes, std::min(3, max_reps), max_reps));
    const bool gather_fits = bytes * ranks <= max_gather_bytes;
    BenchBuffer in(tracker, bytes), result(tracker, bytes);
    std::unique_ptr<BenchBuffer> gathered =
        gather_fits ? std::make_unique<BenchBuffer>(tracker, bytes * ranks) : nullptr;

    auto refill = [&] { in.refill(); };
    // One row; row_bytes (default: this size) is the message per rank.
    auto report = [&](const char* op, const char* algorithm, const char* direction, Timing t, int64_t row_bytes = 0) {
      if (rank != 0) return;
      const int64_t b = row_bytes > 0 ? row_bytes : bytes;
      std::fprintf(out, "%s,%d,%s,%s,%s,%ld,f32,%d,%.2f,%.2f,%.3f\n", backend.c_str(), ranks, op, algorithm, direction,
                   static_cast<long>(b), reps, t.best * 1e6, t.median * 1e6, b / t.median * 1e-9);
      std::fflush(out);
      std::fprintf(stderr, "  %-9s %-18s %-7s %10ld B  best %10.1f us  median %10.1f us\n", op, algorithm, direction,
                   static_cast<long>(b), t.best * 1e6, t.median * 1e6);
    };

    for (ScanAlgorithm algorithm :
         {ScanAlgorithm::Chain, ScanAlgorithm::Allgather, ScanAlgorithm::RecursiveDoubling, ScanAlgorithm::Auto}) {
      const ScanAlgorithm resolved =
          algorithm == ScanAlgorithm::Auto ? choose_scan_algorithm(ranks, bytes, segment_bytes) : algorithm;
      if (resolved == ScanAlgorithm::Allgather && !gather_fits) continue;
      for (ScanDirection direction : {ScanDirection::Forward, ScanDirection::Reverse}) {
        if (algorithm == ScanAlgorithm::Auto && direction == ScanDirection::Reverse) continue;
        const ScanOptions options = scan_options(algorithm, direction);
        const Timing t = time_collective(
            *comm, refill, [&] { exclusive_scan(*comm, in.get(), result.get(), count, *sum, options); }, reps);
        report("scan", scan_algorithm_name(algorithm), scan_direction_name(direction), t);
      }
    }
    // The segmented form over whole values of --segment-granule floats plus
    // their flags, beside the plain sum scan of the same bytes, chain and the
    // automatic choice, forward (the buffers hold 1.0 everywhere: every flag
    // set; the select costs the same either way). The bytes column of these
    // rows is that size.
    const int64_t values = count / segment_granule;
    if (values > 0) {
      const int64_t seg_count = values * (segment_granule + 1);
      BenchBuffer seg_in(tracker, seg_count * 4), seg_out(tracker, seg_count * 4);
      auto seg_refill = [&] { seg_in.refill(); };
      for (ScanAlgorithm algorithm : {ScanAlgorithm::Chain, ScanAlgorithm::Auto}) {
        const ScanOptions options = scan_options(algorithm);
        const Timing plain = time_collective(
            *comm, seg_refill, [&] { exclusive_scan(*comm, seg_in.get(), seg_out.get(), seg_count, *sum, options); },
            reps);
        report("plain_scan_same_bytes", scan_algorithm_name(algorithm), "forward", plain, seg_count * 4);
        const Timing t = time_collective(
            *comm, seg_refill,
            [&] { exclusive_scan(*comm, seg_in.get(), seg_out.get(), seg_count, *segmented, options); }, reps);
        report("segmented_scan", scan_algorithm_name(algorithm), "forward", t, seg_count * 4);
      }
    }
    // The model's state combines: `states` whole states per rank, with and
    // without their flags (0: every combine computes).
    const int64_t ss = state_combine.granule(), states = count / ss;
    if (states > 0) {
      std::vector<float> flagged(static_cast<size_t>(states * (ss + 1)), 1.0f);
      for (int64_t j = 0; j < states; ++j) flagged[static_cast<size_t>(j * (ss + 1))] = 0.0f;
      BenchBuffer plain_in(tracker, states * ss * 4), plain_out(tracker, states * ss * 4);
      BenchBuffer seg_in(tracker, states * (ss + 1) * 4, flagged), seg_out(tracker, states * (ss + 1) * 4);
      for (ScanAlgorithm algorithm : {ScanAlgorithm::Chain, ScanAlgorithm::Auto}) {
        const ScanOptions options = scan_options(algorithm);
        const Timing plain = time_collective(
            *comm, [&] { plain_in.refill(); },
            [&] { exclusive_scan(*comm, plain_in.get(), plain_out.get(), states * ss, state_combine, options); }, reps);
        report("state_scan", scan_algorithm_name(algorithm), "forward", plain, states * ss * 4);
        const Timing t = time_collective(
            *comm, [&] { seg_in.refill(); },
            [&] {
              exclusive_scan(*comm, seg_in.get(), seg_out.get(), states * (ss + 1), segmented_state_combine, options);
            },
            reps);
        report("segmented_state_scan", scan_algorithm_name(algorithm), "forward", t, states * (ss + 1) * 4);
      }
    }
    report(
        "allreduce", "sum", "-",
        time_collective(
            *comm, refill, [&] { comm->allreduce(in.get(), result.get(), count, DType::f32, ReduceOp::Sum); }, reps));
    if (gathered) {
      report("allgather", "-", "-",
             time_collective(
                 *comm, refill, [&] { comm->allgather(in.get(), gathered->get(), count, DType::f32); }, reps));
    }
  }
  csv_out.commit();
  comm.reset();
  return 0;
}

}  // namespace

int run_comm(int argc, char** argv) {
  return run_mpi_program(
      argc, argv, "performer-bench comm", [&](int, int) { return run_comm_ranks(argc, argv); }, MpiErrorReport::Plain);
}

}  // namespace pf::bench
