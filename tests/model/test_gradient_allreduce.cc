// The bucketed gradient allreduce that runs during the backward
// (model/gradient_allreduce.h), under mpirun: every element ends as the sum
// over ranks, the buckets follow the announced ranges (at most bucket_elems
// each), overlapped and deferred reductions give the same bits, and misuse is
// refused with the offending values.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>
#include <vector>

#include "model/gradient_allreduce.h"
#include "runtime/comm_mpi.h"
#include "runtime/errors.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

constexpr int64_t kTotal = 10007;
constexpr int64_t kBucket = 777;
const std::vector<int64_t> kReady = {9000, 6000, 6000, 2500, 100};

std::vector<float> rank_values(int rank) {
  const std::vector<double> v = test::normal_vector(kTotal, 41, static_cast<uint64_t>(rank));
  return std::vector<float>(v.begin(), v.end());
}

// Buckets the rule cuts from kReady and the final remainder.
int64_t expected_buckets() {
  int64_t count = 0, posted = kTotal;
  std::vector<int64_t> points = kReady;
  points.push_back(0);
  for (int64_t from : points) {
    if (from < posted) count += (posted - from + kBucket - 1) / kBucket;
    posted = std::min(posted, from);
  }
  return count;
}

std::vector<float> reduce_with(Communicator& world, bool overlap, GradientAllreduceTiming* timing) {
  GradientAllreduce ar(world, kBucket, overlap);
  std::vector<float> g = rank_values(world.rank());
  for (int step = 0; step < 2; ++step) {  // the object is reused across steps
    g = rank_values(world.rank());
    ar.begin(Stream{}, g.data(), kTotal);
    for (int64_t from : kReady) ar.ready(from);
    *timing = ar.finish();
  }
  return g;
}

TEST(GradientAllreduce, EveryElementIsTheSumOverRanks) {
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  const int P = world->size();
  GradientAllreduceTiming t;
  const std::vector<float> got = reduce_with(*world, true, &t);
  std::vector<double> want(kTotal, 0.0);
  for (int r = 0; r < P; ++r) {
    const std::vector<float> v = rank_values(r);
    for (int64_t i = 0; i < kTotal; ++i) want[i] += v[i];
  }
  int bad = 0;
  for (int64_t i = 0; i < kTotal; ++i)
    if (std::abs(got[i] - want[i]) > 1e-6 * P * (1 + std::abs(want[i])) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << want[i];
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(t.buckets, P > 1 ? expected_buckets() : 0);
}

// The host writes the gradients here (Stream{}: a synchronous CPU stream).
TEST(GradientAllreduce, OverlapOnAStreamOrderedCommunicatorGivesTheSameBits) {
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  GradientAllreduceTiming on, off;
  const std::vector<float> a = reduce_with(*world, true, &on);
  const std::vector<float> b = reduce_with(*world, false, &off);
  // MPI overlaps with asynchronous CPU streams (PF_CPU_STREAMS=async...).
  EXPECT_EQ(on.overlapped, world->size() > 1 && world->stream_ordered());
  EXPECT_FALSE(off.overlapped);
  EXPECT_EQ(on.buckets, off.buckets);
  EXPECT_EQ(a, b);
}

TEST(GradientAllreduce, MisuseIsRefused) {
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  GradientAllreduce ar(*world, kBucket, true);
  std::vector<float> g(kTotal, 1.f);
  EXPECT_THROW(ar.ready(10), ValueError);
  EXPECT_THROW(ar.finish(), ValueError);
  ar.begin(Stream{}, g.data(), kTotal);
  EXPECT_THROW(ar.begin(Stream{}, g.data(), kTotal), ValueError);
  ar.ready(5000);
  try {
    ar.ready(6000);
    ADD_FAILURE() << "an increasing ready() was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("ready(6000) after ready(5000)"), std::string::npos) << e.what();
  }
  ar.finish();
  for (float x : g) ASSERT_EQ(x, static_cast<float>(world->size()));
  EXPECT_THROW(GradientAllreduce(*world, 0, true), ValueError);
}

}  // namespace
}  // namespace pf
