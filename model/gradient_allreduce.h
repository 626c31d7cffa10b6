// Sums a flat gradient buffer [total] over a communicator in buckets, while the
// backward is still running.
//
// The backward walks the parameter layout from the end to the start (final
// LayerNorm, layer L-1, ..., layer 0, embedding), so after each block it
// announces ready(from): every element of [from, total) is final. ready() cuts
// the newly final range into buckets of at most `bucket_elems` elements, from
// its end down, and issues their allreduces on the communicator's stream,
// ordered after the compute stream's work so far (an event). The buckets
// depend only on the sequence of ready() calls, never on timing, and every
// collective of a rank is issued by the one thread that runs the step, in
// program order, so every rank issues the same collectives (these and the
// sequence group's scans) in the same order: no cross-thread or
// cross-communicator order hazard (docs/comm.md). finish() issues what was
// not announced and makes the compute stream wait for the last bucket.
//
// Overlap needs a stream-ordered communicator (NCCL, or MPI with asynchronous
// CPU streams), whose work runs while the backward goes on. On a host-blocking
// one (or with overlap off) the same buckets are summed inside finish(), after
// the backward, so the result is bit-identical either way.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/comm.h"
#include "runtime/device.h"

namespace pf {

struct GradientAllreduceTiming {
  double busy = 0;     // seconds the reductions took on the communicator's stream
  double exposed = 0;  // seconds the compute stream (or the host) waited for them
  int64_t buckets = 0;
  bool overlapped = false;
};

class GradientAllreduce {
 public:
  // `comm` is duplicated (collective over its ranks). bucket_elems >= 1 is the
  // largest bucket.
  GradientAllreduce(Communicator& comm, int64_t bucket_elems, bool overlap);
  GradientAllreduce(const GradientAllreduce&) = delete;
  GradientAllreduce& operator=(const GradientAllreduce&) = delete;

  // True when the buckets are reduced during the backward.
  bool overlapping() const { return overlap_; }

  // Starts one step's reduction of grads [total] (on the communicator's
  // device), written by the backward on `compute`.
  void begin(const Stream& compute, float* grads, int64_t total);
  // [from, total) is final. `from` never increases within a step.
  void ready(int64_t from);
  // Issues whatever is left, makes the compute stream wait for every bucket,
  // drains it, and returns the step's timing (rethrowing a failed reduction
  // with its context).
  GradientAllreduceTiming finish();

 private:
  void post(int64_t from, int64_t to);  // cuts [from, to) into buckets
  void issue();                         // issues the buckets cut so far

  std::unique_ptr<Communicator> comm_;  // private duplicate; nullptr for one rank
  int64_t bucket_elems_;
  bool overlap_ = false;
  Stream compute_;
  float* grads_ = nullptr;
  int64_t total_ = 0;
  int64_t final_from_ = 0;   // [final_from_, total_) announced final
  int64_t posted_from_ = 0;  // [posted_from_, total_) already issued
  bool in_step_ = false;
  std::vector<std::pair<int64_t, int64_t>> cut_;  // buckets [first, end) not issued yet
  std::vector<Event> bucket_events_;  // start and end of each bucket on the comm stream
};

}  // namespace pf
