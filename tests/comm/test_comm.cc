// Communicator collectives and groups on the MPI backend (and the one-rank
// local backend): allreduce sum/max/min, allgather, broadcast from every root,
// grouped send/recv in a ring that would deadlock if blocking, split groups,
// the dp x sp grid, and the errors for misuse. Inputs are keyed by
// (seed, rank, index): every rank checks exact results.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/errors.h"
#include "runtime/grid.h"
#include "runtime/scan.h"
#include "tests/comm/comm_test_util.h"

namespace pf {
namespace {

using test::keyed_int;

std::unique_ptr<Communicator> world_comm() { return make_mpi_comm(MPI_COMM_WORLD); }

template <typename T>
std::vector<T> keyed(int64_t n, uint64_t seed, int rank) {
  std::vector<T> v(static_cast<size_t>(n));
  test::fill_sum_input(v.data(), n, seed, rank);
  return v;
}

template <typename T>
void check_allreduce(Communicator& comm, int64_t n, uint64_t seed) {
  const int rank = comm.rank(), ranks = comm.size();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<T> want = keyed<T>(n, seed, 0);
    for (int r = 1; r < ranks; ++r) {
      const std::vector<T> other = keyed<T>(n, seed, r);
      for (int64_t i = 0; i < n; ++i) {
        want[i] = op == ReduceOp::Sum   ? T(want[i] + other[i])
                  : op == ReduceOp::Max ? std::max(want[i], other[i])
                                        : std::min(want[i], other[i]);
      }
    }
    const std::vector<T> input = keyed<T>(n, seed, rank);
    std::vector<T> out(input.size());
    comm.allreduce(input.data(), out.data(), n, dtype_of<T>::value, op);
    synchronize(comm.stream());
    EXPECT_EQ(out, want) << reduce_op_name(op) << " " << dtype_name(dtype_of<T>::value) << " n=" << n;
    std::vector<T> inplace = input;
    comm.allreduce(inplace.data(), inplace.data(), n, dtype_of<T>::value, op);
    synchronize(comm.stream());
    EXPECT_EQ(inplace, want) << "in place " << reduce_op_name(op) << " " << dtype_name(dtype_of<T>::value);
  }
}

TEST(Comm, RankAndSizeMatchMpi) {
  auto world = world_comm();
  EXPECT_EQ(world->rank(), test::world_rank());
  EXPECT_EQ(world->size(), test::world_size());
  EXPECT_EQ(world->device(), Device::cpu());
  EXPECT_STREQ(world->backend_name(), "mpi");
  auto local = make_local_comm();
  EXPECT_EQ(local->rank(), 0);
  EXPECT_EQ(local->size(), 1);
}

TEST(Comm, AllreduceSumMaxMin) {
  auto world = world_comm();
  auto local = make_local_comm();
  for (Communicator* comm : {world.get(), local.get()}) {
    check_allreduce<double>(*comm, 1000, 1);
    check_allreduce<float>(*comm, 33, 2);
    check_allreduce<int64_t>(*comm, 17, 3);
    check_allreduce<int32_t>(*comm, 5, 4);
  }
}

TEST(Comm, AllgatherOutOfPlaceAndInPlace) {
  auto world = world_comm();
  auto local = make_local_comm();
  for (Communicator* comm : {world.get(), local.get()}) {
    const int rank = comm->rank(), ranks = comm->size();
    for (int64_t n : {1, 3, 1000}) {
      std::vector<float> want;
      for (int r = 0; r < ranks; ++r) {
        const auto block = keyed<float>(n, 5, r);
        want.insert(want.end(), block.begin(), block.end());
      }
      const auto mine = keyed<float>(n, 5, rank);
      std::vector<float> out(want.size(), -1.f);
      comm->allgather(mine.data(), out.data(), n, DType::f32);
      synchronize(comm->stream());
      EXPECT_EQ(out, want) << "n=" << n;
      std::vector<float> inplace(want.size(), -1.f);
      std::copy(mine.begin(), mine.end(), inplace.begin() + rank * n);
      comm->allgather(inplace.data() + rank * n, inplace.data(), n, DType::f32);
      synchronize(comm->stream());
      EXPECT_EQ(inplace, want) << "in place n=" << n;
    }
  }
}

TEST(Comm, BroadcastFromEveryRoot) {
  auto world = world_comm();
  for (int root = 0; root < world->size(); ++root) {
    std::vector<int64_t> buf = keyed<int64_t>(257, 6, world->rank());
    world->broadcast(buf.data(), 257, DType::i64, root);
    synchronize(world->stream());
    EXPECT_EQ(buf, keyed<int64_t>(257, 6, root)) << "root " << root;
  }
}

// Every rank sends to its right neighbour and receives from its left, 1 MiB
// (past any eager limit): with blocking sends every rank would wait forever.
void check_ring_exchange(Communicator& comm) {
  const int rank = comm.rank(), ranks = comm.size();
  const int64_t n = 1 << 17;
  const auto mine = keyed<double>(n, 7, rank);
  std::vector<double> got(n, 0.0);
  comm.group_begin();
  comm.send(mine.data(), n, DType::f64, (rank + 1) % ranks);
  comm.recv(got.data(), n, DType::f64, (rank + ranks - 1) % ranks);
  comm.group_end();
  synchronize(comm.stream());
  EXPECT_EQ(got, keyed<double>(n, 7, (rank + ranks - 1) % ranks));
  // The same exchange the other way round through the send_recv helper.
  send_recv(comm, mine.data(), (rank + ranks - 1) % ranks, got.data(), (rank + 1) % ranks, n, DType::f64);
  synchronize(comm.stream());
  EXPECT_EQ(got, keyed<double>(n, 7, (rank + 1) % ranks));
}

TEST(Comm, GroupedRingExchangeDoesNotDeadlock) {
  auto world = world_comm();
  check_ring_exchange(*world);
  auto local = make_local_comm();
  check_ring_exchange(*local);
}

TEST(Comm, NestedGroupsCompleteAtTheOutermostEnd) {
  auto world = world_comm();
  const int rank = world->rank(), ranks = world->size();
  std::vector<int32_t> left(3, -1), right(3, -1), sum(1, 0);
  const std::vector<int32_t> mine{rank, 10 * rank, 100 * rank};
  const int one = 1;
  world->group_begin();
  world->send(mine.data(), 3, DType::i32, (rank + 1) % ranks);
  world->group_begin();
  world->send(mine.data(), 3, DType::i32, (rank + ranks - 1) % ranks);
  world->recv(left.data(), 3, DType::i32, (rank + ranks - 1) % ranks);
  world->group_end();
  world->recv(right.data(), 3, DType::i32, (rank + 1) % ranks);
  world->allreduce(&one, sum.data(), 1, DType::i32, ReduceOp::Sum);
  world->group_end();
  const int l = (rank + ranks - 1) % ranks, r = (rank + 1) % ranks;
  synchronize(world->stream());
  EXPECT_EQ(left, (std::vector<int32_t>{l, 10 * l, 100 * l}));
  EXPECT_EQ(right, (std::vector<int32_t>{r, 10 * r, 100 * r}));
  EXPECT_EQ(sum[0], ranks);
}

TEST(Comm, SplitFormsGroupsOrderedByKey) {
  auto world = world_comm();
  const int rank = world->rank(), ranks = world->size();
  // Odd and even ranks, each group in reverse rank order; rank 0 opts out.
  const int color = rank == 0 ? -1 : rank % 2;
  auto sub = world->split(color, -rank);
  if (rank == 0) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;
  for (int r = 1; r < ranks; ++r)
    if (r % 2 == color) members.push_back(r);
  std::sort(members.rbegin(), members.rend());
  EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[sub->rank()], rank);
  std::vector<int32_t> all(members.size());
  const int32_t me = rank;
  sub->allgather(&me, all.data(), 1, DType::i32);
  synchronize(sub->stream());
  EXPECT_EQ(all, std::vector<int32_t>(members.begin(), members.end()));
}

// dp x sp for every sp that divides the world (at 8 ranks: 1x8, 2x4, 4x2, 8x1).
TEST(Grid, EveryFactorisationOfTheWorld) {
  const int ranks = test::world_size();
  for (int sp = 1; sp <= ranks; ++sp) {
    if (ranks % sp) continue;
    ParallelGrid grid(world_comm(), sp);
    const int rank = grid.world_rank();
    EXPECT_EQ(grid.sp_size(), sp);
    EXPECT_EQ(grid.dp_size(), ranks / sp);
    EXPECT_EQ(grid.dp_rank() * sp + grid.sp_rank(), rank);
    EXPECT_EQ(grid.sp_group().size(), sp);
    EXPECT_EQ(grid.sp_group().rank(), grid.sp_rank());
    EXPECT_EQ(grid.dp_group().size(), ranks / sp);
    EXPECT_EQ(grid.dp_group().rank(), grid.dp_rank());
    // Members: the sp group holds world ranks dp_rank*sp + [0, sp), the dp
    // group the ranks i*sp + sp_rank.
    std::vector<int32_t> sp_members(sp), dp_members(ranks / sp);
    const int32_t me = rank;
    grid.sp_group().allgather(&me, sp_members.data(), 1, DType::i32);
    grid.dp_group().allgather(&me, dp_members.data(), 1, DType::i32);
    synchronize(grid.sp_group().stream());
    synchronize(grid.dp_group().stream());
    for (int i = 0; i < sp; ++i) EXPECT_EQ(sp_members[i], grid.dp_rank() * sp + i) << "sp=" << sp;
    for (int i = 0; i < ranks / sp; ++i) EXPECT_EQ(dp_members[i], i * sp + grid.sp_rank()) << "sp=" << sp;
    // A scan over the sequence group sums the world ranks before this one in its group.
    auto sum = make_sum_combine(DType::i64);
    const int64_t mine = rank;
    int64_t prefix = -1;
    exclusive_scan(grid.sp_group(), &mine, &prefix, 1, *sum);
    const int64_t first = grid.dp_rank() * sp;
    synchronize(grid.sp_group().stream());
    EXPECT_EQ(prefix, (first + rank - 1) * (rank - first) / 2) << "sp=" << sp;
  }
}

TEST(Grid, RejectsSequenceSizesThatDoNotDivideTheWorld) {
  const int ranks = test::world_size();
  for (int sp : {0, ranks + 1}) {
    try {
      ParallelGrid grid(world_comm(), sp);
      FAIL() << "sp=" << sp << " accepted";
    } catch (const ValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("sp = " + std::to_string(sp)), std::string::npos) << what;
      EXPECT_NE(what.find("world size " + std::to_string(ranks)), std::string::npos) << what;
    }
  }
}

TEST(CommErrors, MisuseThrowsCommErrorWithContext) {
  auto world = world_comm();
  const int ranks = world->size();
  double x = 0;
  try {
    world->send(&x, 1, DType::f64, ranks);
    FAIL() << "no throw";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("peer " + std::to_string(ranks)), std::string::npos) << e.what();
  }
  EXPECT_THROW(world->group_end(), CommError);
  world->group_begin();
  EXPECT_THROW(world->barrier(), CommError);
  EXPECT_THROW(world->split(0, 0), CommError);
  world->group_end();
  uint16_t h = 0;
  EXPECT_THROW(world->allreduce(&h, &h, 1, DType::f16, ReduceOp::Sum), CommError);
  // Half-precision bits still move.
  world->broadcast(&h, 1, DType::bf16, 0);
  world->barrier();
}

TEST(CommErrors, LocalSendWithoutAGroupHasNoPartner) {
  auto local = make_local_comm();
  double x = 1, y = 0;
  EXPECT_THROW(local->send(&x, 1, DType::f64, 0), CommError);
  local->group_begin();
  local->send(&x, 1, DType::f64, 0);
  EXPECT_THROW(local->group_end(), CommError);  // a send and no receive
  local->group_begin();
  local->send(&x, 1, DType::f64, 0);
  local->recv(&y, 1, DType::f64, 0);
  local->group_end();
  EXPECT_EQ(y, 1);
}

#if !defined(PF_HAVE_CUDA)
TEST(CommErrors, NcclWithoutCudaNamesTheReason) {
  try {
    make_nccl_comm(MPI_COMM_WORLD);
    FAIL() << "no throw";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA backend"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace pf
