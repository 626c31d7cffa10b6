// A job in which rank 1 throws while rank 0 waits in a barrier. The test
// harness must end the whole job at once with rank 1's message (MPI_Abort),
// not leave rank 0 hanging: ctest expects this program to fail, quickly, and
// checks the message (tests/comm/CMakeLists.txt).
#include <gtest/gtest.h>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"

namespace pf {
namespace {

TEST(RankThrows, WholeJobFailsWithTheMessage) {
  auto world = make_mpi_comm(MPI_COMM_WORLD);
  PF_REQUIRE(CommError, world->rank() != 1, "deliberate failure on rank " << world->rank() << " of " << world->size());
  world->barrier();  // rank 0 waits here for a rank that never arrives
}

}  // namespace
}  // namespace pf
