#include "model/gradient_allreduce.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>

#include "runtime/check.h"

namespace pf {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Whether a second thread may call into `comm` while the first one makes
// other MPI (or NCCL) calls.
bool thread_safe(const Communicator& comm) {
  const std::string backend = comm.backend_name();
  if (backend == "nccl") return true;
  if (backend != "mpi") return false;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

struct Bucket {
  float* data;
  int64_t count;
};

}  // namespace

// Everything the worker touches, so that a detached worker never outlives it.
struct GradientAllreduce::State {
  std::unique_ptr<Communicator> comm;  // private duplicate; nullptr for one rank
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Bucket> queue;
  int64_t outstanding = 0;  // buckets posted and not yet reduced
  bool stop = false;
  std::exception_ptr error;
  double busy = 0;
  int64_t buckets = 0;

  void reduce(const Bucket& b) {
    const double t0 = seconds_now();
    comm->allreduce(b.data, b.data, b.count, DType::f32, ReduceOp::Sum);
    synchronize(comm->stream());
    busy += seconds_now() - t0;
    ++buckets;
  }

  void worker_loop() {
    for (;;) {
      Bucket b{nullptr, 0};
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [this] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stopped and nothing left
        b = queue.front();
        queue.pop_front();
      }
      std::exception_ptr failed;
      try {
        if (!error) reduce(b);
      } catch (...) {
        failed = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        if (failed && !error) error = failed;
        --outstanding;
      }
      cv.notify_all();
    }
  }
};

GradientAllreduce::GradientAllreduce(Communicator& comm, int64_t bucket_elems, bool overlap)
    : s_(std::make_shared<State>()), bucket_elems_(bucket_elems) {
  PF_REQUIRE(ValueError, bucket_elems >= 1, "gradient allreduce bucket of " << bucket_elems << " elements");
  if (comm.size() == 1) return;
  s_->comm = comm.split(0, comm.rank());
  if (overlap && thread_safe(*s_->comm)) {
    std::shared_ptr<State> state = s_;
    worker_ = std::thread([state] { state->worker_loop(); });
  }
}

GradientAllreduce::~GradientAllreduce() {
  if (!worker_.joinable()) return;
  bool in_flight = false;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop = true;
    in_flight = s_->outstanding > 0;
  }
  s_->cv.notify_all();
  if (in_flight) {
    worker_.detach();  // it keeps the shared state alive
  } else {
    worker_.join();
  }
}

void GradientAllreduce::begin(float* grads, int64_t total) {
  PF_REQUIRE(ValueError, !in_step_, "gradient allreduce: begin() while a step is open (finish() was not called)");
  grads_ = grads;
  total_ = total;
  final_from_ = posted_from_ = total;
  s_->busy = 0;
  s_->buckets = 0;
  in_step_ = true;
}

void GradientAllreduce::ready(int64_t from) {
  PF_REQUIRE(ValueError, in_step_, "gradient allreduce: ready(" << from << ") outside begin()/finish()");
  PF_REQUIRE(ValueError, from >= 0 && from <= final_from_,
             "gradient allreduce: ready(" << from << ") after ready(" << final_from_ << ") of " << total_
                                          << " elements (ranges must be announced from the end down)");
  final_from_ = from;
  if (final_from_ < posted_from_) post(final_from_, posted_from_);
}

void GradientAllreduce::post(int64_t from, int64_t to) {
  posted_from_ = from;
  if (!s_->comm) return;
  for (int64_t end = to; end > from; end -= bucket_elems_) {
    const int64_t first = std::max(from, end - bucket_elems_);
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->queue.push_back(Bucket{grads_ + first, end - first});
      ++s_->outstanding;
    }
    s_->cv.notify_all();
  }
}

GradientAllreduceTiming GradientAllreduce::finish() {
  PF_REQUIRE(ValueError, in_step_, "gradient allreduce: finish() without begin()");
  in_step_ = false;
  const double t0 = seconds_now();
  if (posted_from_ > 0) post(0, posted_from_);
  GradientAllreduceTiming t;
  t.overlapped = worker_.joinable();
  State& s = *s_;
  if (!t.overlapped) {
    // No worker: the same buckets, in the same order, now.
    for (const Bucket& b : s.queue) s.reduce(b);
    s.queue.clear();
    s.outstanding = 0;
  } else {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait(lock, [&s] { return s.outstanding == 0; });
    if (s.error) {
      std::exception_ptr e = s.error;
      s.error = nullptr;
      std::rethrow_exception(e);
    }
  }
  t.exposed = seconds_now() - t0;
  t.busy = s.busy;
  t.buckets = s.buckets;
  return t;
}

}  // namespace pf
