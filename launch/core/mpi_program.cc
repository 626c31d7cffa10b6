#include "launch/core/mpi_program.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "runtime/check.h"
#include "runtime/errors.h"
#include "runtime/watchdog.h"

namespace pf {

namespace {

// Whether every rank of comm reaches this call within seconds: a barrier of
// its own communicator (nothing else is pending on it), given up on when a
// rank does not come (it is working on, or waiting in another collective).
bool all_ranks_arrive(MPI_Comm comm, double seconds) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(comm, &request) != MPI_SUCCESS) return false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

int run_mpi_program(int argc, char** argv, const char* name, const std::function<int(int, int)>& body,
                    MpiErrorReport report, double agree_s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // The ranks' agreement on a ConfigError, apart from the body's traffic.
  MPI_Comm agree = MPI_COMM_NULL;
  if (size > 1) MPI_Comm_dup(MPI_COMM_WORLD, &agree);
  // One failing rank ends the job: the others may be waiting for it in a collective.
  auto fail = [&](const std::exception& e) {
    if (report == MpiErrorReport::Ranked)
      std::fprintf(stderr, "%s: error on rank %d: %s\n", name, rank, e.what());
    else
      std::fprintf(stderr, "%s: %s\n", name, e.what());
    std::fflush(stderr);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  };
  int code = 0;
  try {
    code = body(size, rank);
  } catch (const ConfigError& e) {
    if (report == MpiErrorReport::Ranked && (size == 1 || all_ranks_arrive(agree, agree_s))) {
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", name, e.what());
      code = 2;
    } else {
      code = fail(e);
    }
  } catch (const std::exception& e) {
    code = fail(e);
  }
  if (agree != MPI_COMM_NULL) MPI_Comm_free(&agree);
  if (!initialized) MPI_Finalize();
  return code;
}

int launched_ranks() {
  int size = 1;
  PF_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

void check_on_rank0(MPI_Comm comm, const std::function<void()>& check, Watchdog* watchdog) {
  int rank = 0;
  PF_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string message;
  bool failed = false;
  if (rank == 0) {
    try {
      check();
    } catch (const std::exception& e) {  // pf errors, and filesystem or JSON errors of the check
      failed = true;
      message = e.what();
    }
  }
  Watchdog::Op wait(watchdog, "broadcast of rank 0's check (folders, data, checkpoint, outputs) to every rank");
  int length = failed ? static_cast<int>(message.size()) + 1 : 0;  // 0: passed
  PF_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, comm));
  if (length == 0) return;
  message.resize(static_cast<size_t>(length - 1));
  PF_MPI_CHECK(MPI_Bcast(message.data(), length - 1, MPI_CHAR, 0, comm));
  throw ConfigError(message);
}

std::string value_of_rank0(MPI_Comm comm, const std::function<std::string()>& value, Watchdog* watchdog) {
  std::string v;
  check_on_rank0(
      comm, [&] { v = value(); }, watchdog);
  Watchdog::Op wait(watchdog, "broadcast of rank 0's choice (the checkpoint to resume from) to every rank");
  int length = static_cast<int>(v.size());
  PF_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, comm));
  v.resize(static_cast<size_t>(length));
  if (length > 0) PF_MPI_CHECK(MPI_Bcast(v.data(), length, MPI_CHAR, 0, comm));
  return v;
}

}  // namespace pf
