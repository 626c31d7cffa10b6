// Distributed exclusive scans on the MPI communicator (and the local one):
// every algorithm, both directions, in place and out of place, counts from one
// granule to several chain segments with a remainder, with a sum (f32, f64,
// i64) and two non-commutative combines (affine maps in f32/f64, 2x2 matrices
// mod a prime in i64). Inputs are keyed by (seed, rank, index), so every rank
// checks its exact result.
#include <gtest/gtest.h>

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
