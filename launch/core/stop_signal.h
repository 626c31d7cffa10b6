// SIGINT / SIGTERM / SIGUSR1 (Ctrl-C, cluster preemption, a scheduler's
// warning signal) ask a long-running tool to stop. No handler runs:
// install_stop_handlers() blocks them in the calling thread, so in every
// thread started after it (OpenMP's, oneDNN's, MPI's, the loader's, the
// streams'), and one thread of its own takes them with sigwait() and records
// the first. A signal therefore never interrupts a system call or a library
// in the middle of its work; the program acts on the record at one point of
// its loop. A handler must not run on a computing thread: for some shapes
// (among them the backward's GEMMs) oneDNN's JIT sgemm kernels (2.6.3,
// Debian 12) move the stack pointer to an allocated workspace while they
// run, and the kernel writes a handler's signal frame (about 3 KiB) below
// it, into the heap (docs/testing.md#stop-signals).
// The training loop agrees on the record across ranks (an allreduce of the
// signal number each step, so that rank 0 can name a signal that another
// rank received), saves a checkpoint and exits 0; `performer-data prepare`
// removes its temporary file and exits with 128 + the signal.
// Call it first in main, before MPI_Init and before the program starts any
// thread (it refuses to run later: a thread started earlier would not block
// them). Libraries may start threads before main, as they are loaded
// (OpenBLAS's pool unless OPENBLAS_NUM_THREADS=1 or OMP_NUM_THREADS=1,
// AddressSanitizer's background thread); a signal that lands on one of those
// runs a handler that records it, and nothing else. Only tools that poll
// stop_requested() call it: in any other, Ctrl-C must keep its default
// action. Programs they start (runtime/subprocess.h) begin with an empty
// signal mask. The record is the one piece of process-wide state in the
// trainer.
#pragma once

#include <csignal>

namespace pf {

inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};
// The name of the thread that takes them (/proc/PID/task/TID/comm, top -H).
inline constexpr char kStopThreadName[] = "pf-stop-signals";

void install_stop_handlers();
bool stop_requested();
int stop_signal_number();  // the signal received first, 0 when none

}  // namespace pf
