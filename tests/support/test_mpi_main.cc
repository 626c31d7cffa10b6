// main() for multi-rank tests run as `mpiexec -n N test_binary`.
// Every rank runs every test. Only rank 0 prints gtest's report; a failure on
// any rank makes every rank's exit status non-zero (the outcome is reduced
// with MPI_Allreduce), and an exception escaping a test calls MPI_Abort so the
// job ends at once with the message instead of hanging in a collective.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <exception>

namespace {

// On ranks other than 0 the default printer is removed; this prints their
// failed assertions, labelled with the rank, so a failure on any rank shows.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.summary());
  }

 private:
  int rank_;
};


[[noreturn]] void abort_job() {
  try {
    if (auto e = std::current_exception()) std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "fatal: uncaught exception: %s\n", ex.what());
  } catch (...) {
    std::fprintf(stderr, "fatal: uncaught non-standard exception\n");
  }
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  // MULTIPLE: the attention scan and the gradient allreduce run on worker
  // threads while the main thread computes and communicates.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::set_terminate(abort_job);
  ::testing::InitGoogleTest(&argc, argv);
  // Exceptions must reach std::terminate (and so MPI_Abort) rather than be
  // caught by gtest and turned into a failure while other ranks wait forever
  // in a collective.
  ::testing::GTEST_FLAG(catch_exceptions) = false;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (local != 0) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return any;
}
