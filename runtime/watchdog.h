// A watchdog for waits on other ranks: every blocking wait of a communicator
// (a collective, a message, a group of them, a barrier) and every other wait
// that depends on another rank or thread (the loader's next batch, the
// checkpoint's collective steps) registers itself as an operation while it
// waits. A thread of the watchdog checks the operations in flight; one that
// has made no progress for `timeout_s` (its start, or its last progress())
// fires it: the rank prints what it was waiting for (the operation, the
// caller's phase, the communicator, peers, bytes) and the last operations it
// completed (a flight recorder), runs the abort hooks (ncclCommAbort), and
// ends the whole job through `abort` (MPI_Abort) with kWatchdogExitCode.
//
// Time spent between operations (compute) is never counted: a slow step that
// keeps completing its operations does not fire it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pf {

// The exit status of a job ended by the watchdog (sysexits' EX_TEMPFAIL: a
// failure that a resubmission may not meet again).
constexpr int kWatchdogExitCode = 75;

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // Ends the job (MPI_Abort). Called once, on the watchdog's thread, which
  // ends when it returns (tests record the call).
  using AbortFn = std::function<void(int exit_code)>;

  // timeout_s <= 0 disables the timeout (operations are still recorded, no
  // thread runs). `rank` names this process in the report; the report goes
  // to `report` (stderr by default).
  Watchdog(double timeout_s, int rank, AbortFn abort, std::function<void(const std::string&)> report = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  bool enabled() const { return timeout_s_ > 0; }

  // What the caller is doing, shown beside the operation that fires:
  // "step 12: forward and backward", "checkpoint save at step 200".
  void set_phase(std::string phase);
  // What the report tells the user to do after the job ends; by default the
  // trainer's advice (resume from the last complete checkpoint). Tools that
  // write no checkpoint say their own.
  void set_ending_advice(std::string advice);

  // Functions run before `abort` when the watchdog fires (ncclCommAbort of a
  // communicator); the returned id removes one. Removal waits for hooks that
  // are running and returns false when the hook has run (or was running), so
  // its owner knows the resource is aborted and must not destroy it again
  // (ncclCommDestroy after ncclCommAbort).
  int add_abort_hook(std::function<void()> hook);
  bool remove_abort_hook(int id);

  // One wait in flight, from construction to destruction. `what` describes
  // it ("allreduce of 4096 x f32 on rank 0 of 2 (mpi)"). A null watchdog
  // makes a no-op.
  class Op {
   public:
    Op(Watchdog* watchdog, std::string what);
    ~Op();
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;
    // The operation moved on (a message of it arrived): its clock restarts.
    void progress();

   private:
    Watchdog* watchdog_;
    uint64_t id_ = 0;
  };

  // An operation queued on a device stream: in flight until `done` (polled
  // by the watchdog's thread, a few times per timeout) returns true, e.g.
  // once a CUDA event recorded after it has completed. Without a timeout
  // `done` is not kept and never called.
  void watch_async(std::string what, std::function<bool()> done);

  // Operations completed so far (for benchmarks: waits per step).
  uint64_t completed() const;

  // The report the watchdog prints when it fires, for the operation in flight
  // that has waited longest (empty when none is in flight). For tests.
  std::string report_now() const;

 private:
  struct InFlight {
    std::string what, phase;
    Clock::time_point start, last;
  };
  struct Async {
    InFlight op;
    std::function<bool()> done;
  };
  struct Done {
    std::string what, phase;
    double seconds;
  };
  static constexpr size_t kRecorded = 16;

  uint64_t begin(std::string what);
  void touch(uint64_t id);
  void end(uint64_t id);
  void record_done(InFlight op, Clock::time_point now);
  void loop();
  void fire(const std::string& report);
  std::string report_locked(Clock::time_point now) const;

  const double timeout_s_;
  const int rank_;
  AbortFn abort_;
  std::function<void(const std::string&)> report_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string phase_;
  std::string advice_ = "the last complete checkpoint is kept, resume with --resume auto";
  uint64_t next_id_ = 1;
  uint64_t completed_ = 0;
  std::map<uint64_t, InFlight> in_flight_;
  std::map<uint64_t, Async> async_;
  std::deque<Done> recent_;
  std::mutex hooks_mu_;  // held while the hooks run: removal waits for them
  bool hooks_ran_ = false;
  int next_hook_ = 1;
  std::map<int, std::function<void()>> hooks_;
  std::thread thread_;
};

}  // namespace pf
