// The frame of every MPI program in launch/ (performer-train, performer-eval,
// performer-bench comm and train): MPI_Init_thread with MPI_THREAD_MULTIPLE
// (the attention scan, the gradient allreduce and the asynchronous CPU
// streams call MPI from worker threads), the body, and error handling that
// ends the whole job with the message instead of leaving other ranks waiting
// in a collective: a failing rank prints its message and calls MPI_Abort when
// there are several ranks. Then MPI_Finalize. When MPI is already initialised
// (a caller running the body in its own MPI process), the frame neither
// initialises nor finalises it.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace pf {

class Watchdog;

// How the frame reports an exception that leaves the body.
enum class MpiErrorReport {
  // A ConfigError: "<name>: <message>" from rank 0 only (every rank reads the
  // same configuration and fails the same way), exit code 2, no abort. A
  // ConfigError that not every rank reaches within agree_s seconds ends the
  // job as any other error (the others may be waiting in a collective).
  // Any other error: "<name>: error on rank R: <message>", exit code 1.
  Ranked,
  // Any error: "<name>: <message>" from the failing rank, exit code 1
  // (the performer-bench subcommands).
  Plain,
};

// Runs body(world_size, world_rank) in the frame. Returns the exit code: the
// body's, or the error's (see MpiErrorReport).
int run_mpi_program(int argc, char** argv, const char* name,
                    const std::function<int(int world_size, int world_rank)>& body,
                    MpiErrorReport report = MpiErrorReport::Ranked, double agree_s = 30.0);

// The ranks launched: the size of MPI_COMM_WORLD (MPI initialised), for the
// checks a tool makes before its session exists.
int launched_ranks();

// Runs check on rank 0 of comm only and raises its error, as a ConfigError
// with the same message, on every rank of comm. For checks of the file system
// (an output's folder, whether another process holds a file): they can
// differ between ranks by time or node, and an error that some ranks raise
// and others do not leaves those waiting. Collective over comm; the
// broadcast is watched by `watchdog` when one is given.
void check_on_rank0(MPI_Comm comm, const std::function<void()>& check, Watchdog* watchdog = nullptr);
// The same for a choice that every rank must share (which checkpoint to
// resume from): `value` runs on rank 0 only, an error it raises is raised
// on every rank as by check_on_rank0, and every rank returns rank 0's value.
std::string value_of_rank0(MPI_Comm comm, const std::function<std::string()>& value, Watchdog* watchdog = nullptr);

}  // namespace pf
