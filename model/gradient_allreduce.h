// Sums a flat gradient buffer [total] over a communicator in buckets, while the
// backward is still running.
//
// The backward walks the parameter layout from the end to the start (final
// LayerNorm, layer L-1, ..., layer 0, embedding), so after each block it
// announces ready(from): every element of [from, total) is final. The
// announcing thread cuts the newly final range into buckets of at most
// `bucket_elems` elements, from its end down. The buckets depend only on the
// sequence of ready() calls, never on timing, so every rank posts the same
// allreduces in the same order. A worker thread sums each bucket over a
// private duplicate of the communicator while the backward goes on; finish()
// cuts whatever was not announced and waits for the last bucket.
//
// Overlap needs a communicator that two threads may use at once: NCCL, or MPI
// initialised with MPI_THREAD_MULTIPLE. Otherwise (or with overlap off) the
// same buckets are summed inside finish(), after the backward, so the result
// is bit-identical either way.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>

#include "runtime/comm.h"

namespace pf {

struct GradientAllreduceTiming {
  double busy = 0;     // seconds the reductions took (on the worker when overlapped)
  double exposed = 0;  // seconds finish() waited for them (the part not hidden by the backward)
  int64_t buckets = 0;
  bool overlapped = false;
};

class GradientAllreduce {
 public:
  // `comm` is duplicated (collective over its ranks). bucket_elems >= 1 is the
  // largest bucket.
  GradientAllreduce(Communicator& comm, int64_t bucket_elems, bool overlap);
  // Stops the worker. If a step is being abandoned (an exception during the
  // backward) with buckets still in flight, the worker is detached rather than
  // waited for: it may be blocked in a collective that the other ranks will
  // never join, and the error must reach the program's handler (which aborts
  // the job).
  ~GradientAllreduce();
  GradientAllreduce(const GradientAllreduce&) = delete;
  GradientAllreduce& operator=(const GradientAllreduce&) = delete;

  // True when reductions run on the worker thread during the backward.
  bool overlapping() const { return worker_.joinable(); }

  // Starts one step's reduction of grads [total] (on the communicator's device).
  void begin(float* grads, int64_t total);
  // [from, total) is final. `from` never increases within a step.
  void ready(int64_t from);
  // Reduces whatever is left, waits for every bucket and returns the step's
  // timing. Rethrows an error of the worker (with its context).
  GradientAllreduceTiming finish();

 private:
  struct State;  // shared with the worker thread
  void post(int64_t from, int64_t to);  // cuts [from, to) into buckets

  std::shared_ptr<State> s_;
  int64_t bucket_elems_;
  float* grads_ = nullptr;
  int64_t total_ = 0;
  int64_t final_from_ = 0;   // [final_from_, total_) announced final
  int64_t posted_from_ = 0;  // [posted_from_, total_) already cut into buckets
  bool in_step_ = false;
  std::thread worker_;
};

}  // namespace pf
