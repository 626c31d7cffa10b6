// Distributed exclusive scans on the MPI communicator (and the local one):
// every algorithm, both directions, in place and out of place, counts from one
// granule to several chain segments with a remainder, with a sum (f32, f64,
// i64) and two non-commutative combines (affine maps in f32/f64, 2x2 matrices
// mod a prime in i64). Inputs are keyed by (seed, rank, index), so every rank
// checks its exact result.
#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/errors.h"
#include "runtime/scan.h"
#include "tests/comm/comm_test_util.h"

namespace pf {
namespace {

using test::AffineCombine;
using test::MatrixModCombine;

const ScanAlgorithm kAlgorithms[] = {ScanAlgorithm::Auto, ScanAlgorithm::Chain, ScanAlgorithm::Allgather,
                                     ScanAlgorithm::RecursiveDoubling};
const ScanDirection kDirections[] = {ScanDirection::Forward, ScanDirection::Reverse};

// Runs every (algorithm, direction, in-place, count) case on `comm` and checks
// the exact result. Small chain segments (64 bytes) make the larger counts
// pipeline through many segments and a partial last one.
template <typename T, typename Fill>
void check_all_scans(Communicator& comm, const ScanCombine& combine, Fill fill, const std::vector<int64_t>& counts,
                     uint64_t seed) {
  const int rank = comm.rank(), ranks = comm.size();
  MemoryTracker tracker(comm.device());
  {
    ScanWorkspace workspace(tracker);  // reused (and grown) across the cases that take it
    for (int64_t count : counts) {
      std::vector<T> input(static_cast<size_t>(count));
      fill(input.data(), count, seed, rank);
      for (ScanDirection direction : kDirections) {
        const std::vector<T> want = test::expected_scan<T>(combine, fill, count, seed, rank, ranks, direction);
        for (ScanAlgorithm algorithm : kAlgorithms) {
          for (int variant = 0; variant < 4; ++variant) {
            const bool in_place = variant & 1, reuse = variant & 2;
            const int64_t workspace_bytes = workspace.bytes(), live_before = tracker.stats().current_bytes;
            ScanOptions options;
            options.direction = direction;
            options.algorithm = algorithm;
            options.chain_segment_bytes = 64;
            options.tracker = &tracker;
            if (reuse) options.workspace = &workspace;
            std::vector<T> out(input.size(), T(-7));
            std::vector<T> buf = input;
            if (in_place) {
              exclusive_scan(comm, buf.data(), buf.data(), count, combine, options);
              synchronize(comm.stream());  // the scan completes on the communicator's stream
              out = buf;
            } else {
              exclusive_scan(comm, input.data(), out.data(), count, combine, options);
              synchronize(comm.stream());
            }
            int64_t mismatches = 0, first = -1;
            for (int64_t i = 0; i < count; ++i) {
              if (out[i] != want[i]) {
                if (first < 0) first = i;
                ++mismatches;
              }
            }
            EXPECT_EQ(mismatches, 0) << combine.name() << " " << dtype_name(combine.dtype()) << " "
                                     << scan_algorithm_name(algorithm) << " " << scan_direction_name(direction)
                                     << (in_place ? " in place" : " out of place") << (reuse ? " with a workspace" : "")
                                     << " count " << count << " on rank " << rank << " of " << ranks
                                     << ": first bad index " << first << " got " << (first >= 0 ? out[first] : T(0))
                                     << " want " << (first >= 0 ? want[first] : T(0));
            if (!in_place) {
              EXPECT_EQ(buf, input) << "out-of-place scan changed its input";
            }
            // Per-call scratch is freed; only the reusable workspace may grow.
            EXPECT_EQ(tracker.stats().current_bytes - live_before, workspace.bytes() - workspace_bytes)
                << "scan scratch leaked";
          }
        }
      }
    }
  }
  EXPECT_EQ(tracker.stats().current_bytes, 0) << "scan workspace not freed";
}

template <typename T>
void check_sum_scans(Communicator& comm, uint64_t seed) {
  auto combine = make_sum_combine(dtype_of<T>::value);
  check_all_scans<T>(comm, *combine, test::fill_sum_input<T>, {1, 2, 7, 100, 1031}, seed);
}

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override { world_ = make_mpi_comm(MPI_COMM_WORLD); }
  std::unique_ptr<Communicator> world_;
};

TEST_F(ScanTest, SumF64) { check_sum_scans<double>(*world_, 11); }
TEST_F(ScanTest, SumF32) { check_sum_scans<float>(*world_, 12); }
TEST_F(ScanTest, SumI64) { check_sum_scans<int64_t>(*world_, 13); }

TEST_F(ScanTest, AffineMapsF64NonCommutative) {
  AffineCombine<double> combine;
  check_all_scans<double>(*world_, combine, AffineCombine<double>::fill_input, {2, 6, 128, 1030}, 21);
}

TEST_F(ScanTest, AffineMapsF32NonCommutative) {
  AffineCombine<float> combine;
  check_all_scans<float>(*world_, combine, AffineCombine<float>::fill_input, {2, 34, 1030}, 22);
}

TEST_F(ScanTest, MatricesModPrimeNonCommutative) {
  MatrixModCombine combine;
  check_all_scans<int64_t>(*world_, combine, MatrixModCombine::fill_input, {4, 12, 1028}, 23);
}

// ---- segmented scans -------------------------------------------------------
using test::Flags;
using test::kFlagPatterns;
using test::segmented_fill;

// The segmented scan's definition, with the inner combine alone: for each
// granule, the inner combine of the blocks from the last flagged one before
// `rank` (in scan order) up to the one next to it, and the or of their flags.
template <typename T, typename Fill>
std::vector<T> segmented_definition(const ScanCombine& inner, Fill fill, int64_t count, uint64_t seed, int rank,
                                    int ranks, ScanDirection direction) {
  const int64_t g = inner.granule(), granules = count / (g + 1);
  const int v = direction == ScanDirection::Forward ? rank : ranks - 1 - rank;
  std::vector<std::vector<T>> blocks(static_cast<size_t>(v), std::vector<T>(static_cast<size_t>(count)));
  for (int i = 0; i < v; ++i) fill(blocks[i].data(), count, seed, direction == ScanDirection::Forward ? i : ranks - 1 - i);
  std::vector<T> out(static_cast<size_t>(count));
  const Stream host;
  for (int64_t j = 0; j < granules; ++j) {
    T* o = out.data() + j * (g + 1);
    int start = 0;
    bool any = false;
    for (int i = 0; i < v; ++i)
      if (blocks[i][j * (g + 1)] != T(0)) start = i, any = true;
    inner.fill_identity(o + 1, g, host);
    for (int i = start; i < v; ++i) inner.combine(o + 1, blocks[i].data() + j * (g + 1) + 1, o + 1, g, host);
    o[0] = any ? T(1) : T(0);
  }
  return out;
}

// Every algorithm, direction and variant of the segmented form of `inner`
// against the serial fold (check_all_scans), which must equal the definition.
template <typename T, typename Fill>
void check_segmented_scans(Communicator& comm, const ScanCombine& inner, Fill fill, const std::vector<int64_t>& counts,
                           uint64_t seed, const std::vector<Flags>& patterns) {
  MemoryTracker tracker(comm.device());
  ScanWorkspace scratch(tracker);
  const auto segmented = make_segmented_combine(inner, scratch);
  EXPECT_EQ(segmented->granule(), inner.granule() + 1);
  for (Flags flags : patterns) {
    SCOPED_TRACE(testing::Message() << segmented->name() << ", flag pattern " << static_cast<int>(flags));
    const auto sfill = segmented_fill<T>(fill, inner.granule(), flags, comm.size());
    for (int64_t count : counts)
      for (ScanDirection direction : kDirections)
        EXPECT_EQ((test::expected_scan<T>(*segmented, sfill, count, seed, comm.rank(), comm.size(), direction)),
                  (segmented_definition<T>(inner, sfill, count, seed, comm.rank(), comm.size(), direction)))
            << "count " << count << " " << scan_direction_name(direction) << " on rank " << comm.rank();
    check_all_scans<T>(comm, *segmented, sfill, counts, seed);
  }
}

// Every flag pattern on the affine maps (one value to many chain segments of
// the tests' 64 bytes); random and first- or last-rank flags on the others.
TEST_F(ScanTest, SegmentedAffineMapsF64) {
  AffineCombine<double> inner;
  check_segmented_scans<double>(*world_, inner, AffineCombine<double>::fill_input, {3, 129, 390}, 41,
                                {std::begin(kFlagPatterns), std::end(kFlagPatterns)});
}

TEST_F(ScanTest, SegmentedMatricesModPrime) {
  MatrixModCombine inner;
  check_segmented_scans<int64_t>(*world_, inner, MatrixModCombine::fill_input, {5, 105}, 42,
                                 {Flags::Random, Flags::LastRank});
}

TEST_F(ScanTest, SegmentedSumF32) {
  const auto inner = make_sum_combine(DType::f32);
  check_segmented_scans<float>(*world_, *inner, test::fill_sum_input<float>, {2, 130}, 43,
                               {Flags::Random, Flags::FirstRank});
}

// A flag hides everything before it: on two blocks, the later's flag gives
// the later value alone; without it, the inner combine of both.
TEST(ScanSegmented, FlagResetsTheCombine) {
  const Stream host;
  MemoryTracker tracker(Device::cpu());
  ScanWorkspace scratch(tracker);
  AffineCombine<double> inner;
  const auto seg = make_segmented_combine(inner, scratch);
  const std::vector<double> a{0, 2, 1}, b_flag{1, 3, 5}, b_plain{0, 3, 5};
  std::vector<double> out(3);
  seg->combine(a.data(), b_flag.data(), out.data(), 3, host);
  EXPECT_EQ(out, (std::vector<double>{1, 3, 5}));
  seg->combine(a.data(), b_plain.data(), out.data(), 3, host);
  EXPECT_EQ(out, (std::vector<double>{0, 6, 8}));  // x -> 3 (2 x + 1) + 5
  seg->combine(b_flag.data(), b_plain.data(), out.data(), 3, host);
  EXPECT_EQ(out, (std::vector<double>{1, 9, 20}));  // the earlier flag carries
  seg->fill_identity(out.data(), 3, host);
  EXPECT_EQ(out, (std::vector<double>{0, 1, 0}));
  MemoryTracker gpu_tracker(Device::cuda(0));  // scratch on another device than the combine: refused
  ScanWorkspace gpu_scratch(gpu_tracker);
  EXPECT_THROW(make_segmented_combine(inner, gpu_scratch), ValueError);
}

// The test inputs are themselves non-commutative, so a scan that combined in
// the wrong order could not pass the tests above.
TEST(ScanInputs, CombinesDoNotCommute) {
  const Stream host;
  MatrixModCombine m;
  std::vector<int64_t> x(4), y(4), xy(4), yx(4);
  MatrixModCombine::fill_input(x.data(), 4, 23, 0);
  MatrixModCombine::fill_input(y.data(), 4, 23, 1);
  m.combine(x.data(), y.data(), xy.data(), 4, host);
  m.combine(y.data(), x.data(), yx.data(), 4, host);
  EXPECT_NE(xy, yx);
  AffineCombine<double> a;
  std::vector<double> f{2, 1}, g{-1, 3}, fg(2), gf(2);
  a.combine(f.data(), g.data(), fg.data(), 2, host);
  a.combine(g.data(), f.data(), gf.data(), 2, host);
  EXPECT_EQ(fg, (std::vector<double>{-2, 2}));  // g(f(x)) = -(2x + 1) + 3
  EXPECT_EQ(gf, (std::vector<double>{-2, 7}));  // f(g(x)) = 2(-x + 3) + 1
}

TEST(ScanLocal, OneRankGetsTheIdentity) {
  auto local = make_local_comm();
  MatrixModCombine combine;
  check_all_scans<int64_t>(*local, combine, MatrixModCombine::fill_input, {4, 1028}, 31);
  check_sum_scans<double>(*local, 32);
}

TEST_F(ScanTest, ZeroCountIsANoOp) {
  auto combine = make_sum_combine(DType::f64);
  double sentinel = 5;
  for (ScanAlgorithm algorithm : kAlgorithms) {
    ScanOptions options;
    options.algorithm = algorithm;
    exclusive_scan(*world_, &sentinel, &sentinel, 0, *combine, options);
    synchronize(world_->stream());
  }
  EXPECT_EQ(sentinel, 5);
}

TEST_F(ScanTest, RejectsCountsThatSplitAGranule) {
  MatrixModCombine combine;
  std::vector<int64_t> buf(6);
  try {
    exclusive_scan(*world_, buf.data(), buf.data(), 6, combine);
    FAIL() << "no throw";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos) << e.what();
  }
}

TEST(ScanAuto, ChoosesTheDocumentedAlgorithms) {
  constexpr int64_t KiB = 1 << 10, MiB = 1 << 20;
  for (int p : {1, 2, 3, 4, 5, 8})
    for (int64_t bytes : {4 * KiB, 1 * MiB, 64 * MiB}) EXPECT_EQ(choose_scan_algorithm(p, bytes), ScanAlgorithm::Chain);
  // Beyond 8 ranks: recursive doubling while bytes (ceil(log2 P) - 1) < (P - 2) segment.
  EXPECT_EQ(choose_scan_algorithm(16, 4 * KiB), ScanAlgorithm::RecursiveDoubling);
  EXPECT_EQ(choose_scan_algorithm(16, 4 * MiB), ScanAlgorithm::RecursiveDoubling);   // 12 < 14
  EXPECT_EQ(choose_scan_algorithm(16, 5 * MiB), ScanAlgorithm::Chain);               // 15 > 14
  EXPECT_EQ(choose_scan_algorithm(64, 12 * MiB), ScanAlgorithm::RecursiveDoubling);  // 60 < 62
  EXPECT_EQ(choose_scan_algorithm(64, 13 * MiB), ScanAlgorithm::Chain);              // 65 > 62
  EXPECT_EQ(choose_scan_algorithm(64, 13 * MiB, 2 * MiB), ScanAlgorithm::RecursiveDoubling);
  EXPECT_EQ(parse_scan_algorithm("recursive_doubling"), ScanAlgorithm::RecursiveDoubling);
  EXPECT_THROW(parse_scan_algorithm("ring"), ValueError);
}

TEST(ScanCombines, SumRejectsOtherDtypes) { EXPECT_THROW(make_sum_combine(DType::f16), ValueError); }

}  // namespace
}  // namespace pf
