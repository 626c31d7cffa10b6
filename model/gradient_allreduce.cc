#include "model/gradient_allreduce.h"

#include <algorithm>

#include "runtime/check.h"

namespace pf {

GradientAllreduce::GradientAllreduce(Communicator& comm, int64_t bucket_elems, bool overlap)
    : bucket_elems_(bucket_elems) {
  PF_REQUIRE(ValueError, bucket_elems >= 1, "gradient allreduce bucket of " << bucket_elems << " elements");
  if (comm.size() == 1) return;
  comm_ = comm.split(0, comm.rank());
  overlap_ = overlap && comm_->stream_ordered();
}

void GradientAllreduce::begin(const Stream& compute, float* grads, int64_t total) {
  PF_REQUIRE(ValueError, !in_step_, "gradient allreduce: begin() while a step is open (finish() was not called)");
  compute_ = compute;
  grads_ = grads;
  total_ = total;
  final_from_ = posted_from_ = total;
  bucket_events_.clear();
  cut_.clear();
  in_step_ = true;
}

void GradientAllreduce::ready(int64_t from) {
  PF_REQUIRE(ValueError, in_step_, "gradient allreduce: ready(" << from << ") outside begin()/finish()");
  PF_REQUIRE(ValueError, from >= 0 && from <= final_from_,
             "gradient allreduce: ready(" << from << ") after ready(" << final_from_ << ") of " << total_
                                          << " elements (ranges must be announced from the end down)");
  final_from_ = from;
  if (final_from_ < posted_from_) post(final_from_, posted_from_);
  if (overlap_) issue();
}

void GradientAllreduce::post(int64_t from, int64_t to) {
  posted_from_ = from;
  if (!comm_) return;
  for (int64_t end = to; end > from; end -= bucket_elems_) cut_.push_back({std::max(from, end - bucket_elems_), end});
}

void GradientAllreduce::issue() {
  if (cut_.empty()) return;
  const Stream s = comm_->stream();
  stream_wait_stream(s, compute_);  // the backward wrote these gradients on the compute stream
  for (const auto& [first, end] : cut_) {
    bucket_events_.push_back(record_event(s));
    comm_->allreduce(grads_ + first, grads_ + first, end - first, DType::f32, ReduceOp::Sum);
    bucket_events_.push_back(record_event(s));
  }
  cut_.clear();
}

GradientAllreduceTiming GradientAllreduce::finish() {
  PF_REQUIRE(ValueError, in_step_, "gradient allreduce: finish() without begin()");
  in_step_ = false;
  GradientAllreduceTiming t;
  t.overlapped = overlap_;
  if (posted_from_ > 0) post(0, posted_from_);
  if (!comm_) return t;
  issue();
  const Stream s = comm_->stream();
  const Event wait_from = record_event(compute_);
  stream_wait_stream(compute_, s);
  const Event wait_to = record_event(compute_);
  synchronize(s);  // rethrows a failed reduction
  synchronize(compute_);
  t.buckets = static_cast<int64_t>(bucket_events_.size() / 2);
  for (size_t i = 0; i + 1 < bucket_events_.size(); i += 2)
    t.busy += event_elapsed_seconds(bucket_events_[i], bucket_events_[i + 1]);
  // Host-blocking reductions held the step's thread for all of their time.
  t.exposed = comm_->holds_caller() ? t.busy : event_elapsed_seconds(wait_from, wait_to);
  return t;
}

}  // namespace pf
