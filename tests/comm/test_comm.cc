// Communicator collectives and groups on the MPI backend (and the one-rank
// local backend): allreduce sum/max/min, allgather, broadcast from every root,
// reduce and gatherv (variable counts, zero for some ranks) to every root,
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

// reduce to every root, sum/max/min, out of place and in place: root gets
// the exact reduction, the other ranks' buffers are untouched.
template <typename T>
void check_reduce(Communicator& comm, int64_t n, uint64_t seed) {
  const int rank = comm.rank(), ranks = comm.size();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<T> want = keyed<T>(n, seed, 0);
    for (int r = 1; r < ranks; ++r) {
      const std::vector<T> other = keyed<T>(n, seed, r);
      for (int64_t i = 0; i < n; ++i)
        want[i] = op == ReduceOp::Sum   ? T(want[i] + other[i])
                  : op == ReduceOp::Max ? std::max(want[i], other[i])
                                        : std::min(want[i], other[i]);
    }
    for (int root = 0; root < ranks; ++root) {
      const std::vector<T> input = keyed<T>(n, seed, rank);
      const std::vector<T> untouched(input.size(), T(-7));
      std::vector<T> out = untouched;
      comm.reduce(input.data(), out.data(), n, dtype_of<T>::value, op, root);
      synchronize(comm.stream());
      EXPECT_EQ(out, rank == root ? want : untouched)
          << reduce_op_name(op) << " " << dtype_name(dtype_of<T>::value) << " n=" << n << " root " << root;
      std::vector<T> inplace = input;
      comm.reduce(inplace.data(), inplace.data(), n, dtype_of<T>::value, op, root);
      synchronize(comm.stream());
      EXPECT_EQ(inplace, rank == root ? want : input)
          << "in place " << reduce_op_name(op) << " " << dtype_name(dtype_of<T>::value) << " root " << root;
    }
  }
}

TEST(Comm, ReduceToEveryRoot) {
  auto world = world_comm();
  auto local = make_local_comm();
  for (Communicator* comm : {world.get(), local.get()}) {
    check_reduce<double>(*comm, 1000, 11);
    check_reduce<float>(*comm, 33, 12);
    check_reduce<int64_t>(*comm, 17, 13);
    check_reduce<int32_t>(*comm, 1, 14);
  }
}

// Rank r sends (r * 7 + shift) % 5 elements (zero for some ranks): root gets
// every block in rank order, out of place and in place, from every root;
// recv is not read off the root (nullptr there).
TEST(Comm, GathervOfVariableCountsToEveryRoot) {
  auto world = world_comm();
  auto local = make_local_comm();
  for (Communicator* comm : {world.get(), local.get()}) {
    const int rank = comm->rank(), ranks = comm->size();
    for (int shift : {0, 3}) {
      std::vector<int64_t> counts;
      for (int r = 0; r < ranks; ++r) counts.push_back((r * 7 + shift) % 5 * (shift ? 200 : 1));
      std::vector<float> want;
      for (int r = 0; r < ranks; ++r) {
        const auto block = keyed<float>(counts[r], 20 + shift, r);
        want.insert(want.end(), block.begin(), block.end());
      }
      const auto mine = keyed<float>(counts[rank], 20 + shift, rank);
      for (int root = 0; root < ranks; ++root) {
        std::vector<float> out(rank == root ? want.size() : 0, -1.f);
        comm->gatherv(mine.data(), counts[rank], rank == root ? out.data() : nullptr, counts, DType::f32, root);
        synchronize(comm->stream());
        if (rank == root) {
          EXPECT_EQ(out, want) << "root " << root << " shift " << shift;
        }
      }
      for (int root = 0; root < ranks; ++root) {
        // In place on the root: its own block already at its place.
        std::vector<float> inplace(rank == root ? want.size() : 0, -1.f);
        int64_t before = 0;
        for (int r = 0; r < root; ++r) before += counts[r];
        if (rank == root) std::copy(mine.begin(), mine.end(), inplace.begin() + before);
        const float* send = rank == root ? inplace.data() + before : mine.data();
        comm->gatherv(send, counts[rank], rank == root ? inplace.data() : nullptr, counts, DType::f32, root);
        synchronize(comm->stream());
        if (rank == root) {
          EXPECT_EQ(inplace, want) << "in place, root " << root << " shift " << shift;
        }
      }
    }
  }
}

// Rooted collectives inside a group complete at its end, as the others do:
// a reduce and a gatherv posted together.
TEST(Comm, RootedCollectivesInAGroup) {
  auto world = world_comm();
  const int rank = world->rank(), ranks = world->size(), root = ranks - 1;
  std::vector<int64_t> sum = keyed<int64_t>(64, 30, rank), want_sum = keyed<int64_t>(64, 30, 0);
  for (int r = 1; r < ranks; ++r) {
    const auto other = keyed<int64_t>(64, 30, r);
    for (size_t i = 0; i < want_sum.size(); ++i) want_sum[i] += other[i];
  }
  const std::vector<int64_t> counts(static_cast<size_t>(ranks), 3);
  const auto mine = keyed<double>(3, 31, rank);
  std::vector<double> all(static_cast<size_t>(3 * ranks), 0.0), want_all;
  for (int r = 0; r < ranks; ++r) {
    const auto b = keyed<double>(3, 31, r);
    want_all.insert(want_all.end(), b.begin(), b.end());
  }
  world->group_begin();
  world->reduce(sum.data(), sum.data(), 64, DType::i64, ReduceOp::Sum, root);
  world->gatherv(mine.data(), 3, all.data(), counts, DType::f64, root);
  world->group_end();
  synchronize(world->stream());
  if (rank == root) {
    EXPECT_EQ(sum, want_sum);
    EXPECT_EQ(all, want_all);
  }
}

// The host helpers on a host communicator: the collectives, blocking.
TEST(Comm, HostValueHelpersReduceAndGather) {
  auto world = world_comm();
  MemoryTracker tracker(Device::cpu());
  const int rank = world->rank(), ranks = world->size();
  std::vector<double> v = {1.0 * rank, 2.0, -0.5 * rank};
  reduce_host_values(*world, v.data(), 3, DType::f64, ReduceOp::Sum, 0, tracker);
  const double tri = ranks * (ranks - 1) / 2.0;
  EXPECT_EQ(v, rank == 0 ? (std::vector<double>{tri, 2.0 * ranks, -0.5 * tri})
                         : (std::vector<double>{1.0 * rank, 2.0, -0.5 * rank}));
  std::vector<int64_t> counts;
  for (int r = 0; r < ranks; ++r) counts.push_back(r);
  const std::vector<uint8_t> mine(static_cast<size_t>(rank), static_cast<uint8_t>(rank));
  std::vector<uint8_t> all(rank == 0 ? static_cast<size_t>(tri) : 0), want;
  for (int r = 0; r < ranks; ++r) want.insert(want.end(), static_cast<size_t>(r), static_cast<uint8_t>(r));
  gatherv_host_values(*world, mine.data(), rank, all.data(), counts, DType::u8, 0, tracker);
  if (rank == 0) {
    EXPECT_EQ(all, want);
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
  EXPECT_THROW(world->reduce(&h, &h, 1, DType::bf16, ReduceOp::Sum, 0), CommError);
  EXPECT_THROW(world->reduce(&x, &x, 1, DType::f64, ReduceOp::Sum, ranks), CommError);
  // gatherv: a root outside the group; on the root, counts that are not one
  // per rank or that disagree with its own send.
  EXPECT_THROW(world->gatherv(&x, 1, &x, std::vector<int64_t>(ranks, 1), DType::f64, -1), CommError);
  if (world->rank() == 0) {
    EXPECT_THROW(world->gatherv(&x, 1, &x, std::vector<int64_t>(ranks + 1, 1), DType::f64, 0), CommError);
    EXPECT_THROW(world->gatherv(&x, 1, &x, std::vector<int64_t>(ranks, 2), DType::f64, 0), CommError);
  }
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
