#include "runtime/watchdog.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

namespace pf {

namespace {

double seconds_between(Watchdog::Clock::time_point a, Watchdog::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void print_to_stderr(const std::string& text) {
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

Watchdog::Watchdog(double timeout_s, int rank, AbortFn abort, std::function<void(const std::string&)> report)
    : timeout_s_(timeout_s), rank_(rank), abort_(std::move(abort)), report_(std::move(report)) {
  if (!report_) report_ = print_to_stderr;
  if (enabled()) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::set_phase(std::string phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = std::move(phase);
}

void Watchdog::set_ending_advice(std::string advice) {
  std::lock_guard<std::mutex> lock(mu_);
  advice_ = std::move(advice);
}

int Watchdog::add_abort_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  hooks_[next_hook_] = std::move(hook);
  return next_hook_++;
}

bool Watchdog::remove_abort_hook(int id) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  return hooks_.erase(id) > 0 && !hooks_ran_;
}

uint64_t Watchdog::begin(std::string what) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  in_flight_.emplace(id, InFlight{std::move(what), phase_, now, now});
  return id;
}

void Watchdog::touch(uint64_t id) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(id);
  if (it != in_flight_.end()) it->second.last = now;
}

void Watchdog::end(uint64_t id) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return;
  record_done(std::move(it->second), now);
  in_flight_.erase(it);
}

uint64_t Watchdog::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

void Watchdog::record_done(InFlight op, Clock::time_point now) {
  ++completed_;
  recent_.push_back(Done{std::move(op.what), std::move(op.phase), seconds_between(op.start, now)});
  if (recent_.size() > kRecorded) recent_.pop_front();
}

void Watchdog::watch_async(std::string what, std::function<bool()> done) {
  if (!enabled()) return;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  async_.emplace(next_id_++, Async{InFlight{std::move(what), phase_, now, now}, std::move(done)});
}

Watchdog::Op::Op(Watchdog* watchdog, std::string what) : watchdog_(watchdog) {
  if (watchdog_) id_ = watchdog_->begin(std::move(what));
}

Watchdog::Op::~Op() {
  if (watchdog_) watchdog_->end(id_);
}

void Watchdog::Op::progress() {
  if (watchdog_) watchdog_->touch(id_);
}

std::string Watchdog::report_now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return report_locked(Clock::now());
}

std::string Watchdog::report_locked(Clock::time_point now) const {
  std::vector<const InFlight*> all;
  for (const auto& [_, f] : in_flight_) all.push_back(&f);
  for (const auto& [_, a] : async_) all.push_back(&a.op);
  if (all.empty()) return "";
  // The operation without progress for longest.
  const InFlight& op = **std::min_element(all.begin(), all.end(),
                                          [](const InFlight* a, const InFlight* b) { return a->last < b->last; });
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "watchdog on rank " << rank_ << ": no progress for " << seconds_between(op.last, now)
      << " s (parallel.timeout_s = " << timeout_s_ << ") in " << op.what;
  if (!op.phase.empty()) out << ", during " << op.phase;
  out << "\n";
  if (all.size() > 1) {
    out << "  in flight on this rank:\n";
    for (const InFlight* f : all)
      out << "    " << f->what << " (waiting " << seconds_between(f->start, now) << " s"
          << (f->phase.empty() ? "" : ", during " + f->phase) << ")\n";
  }
  out << "  last operations completed on this rank (oldest first):\n";
  if (recent_.empty()) out << "    none\n";
  out << std::setprecision(6);
  for (const Done& d : recent_)
    out << "    " << d.what << (d.phase.empty() ? "" : ", during " + d.phase) << ": " << d.seconds << " s\n";
  return out.str();
}

void Watchdog::loop() {
  // Checks a few times per timeout, at most once a second: the job ends
  // within timeout_s plus this interval of the stall.
  const auto interval = std::chrono::duration<double>(std::min(1.0, std::max(0.05, timeout_s_ / 8)));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, interval);
    if (stop_) return;
    const Clock::time_point now = Clock::now();
    for (auto it = async_.begin(); it != async_.end();) {
      if (it->second.done()) {
        record_done(std::move(it->second.op), now);
        it = async_.erase(it);
      } else {
        ++it;
      }
    }
    bool stalled = false;
    for (const auto& [_, op] : in_flight_) stalled |= seconds_between(op.last, now) >= timeout_s_;
    for (const auto& [_, a] : async_) stalled |= seconds_between(a.op.last, now) >= timeout_s_;
    if (stalled) {
      const std::string report = report_locked(now);
      lock.unlock();
      fire(report);
      return;
    }
  }
}

void Watchdog::fire(const std::string& report) {
  std::ostringstream end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end << "  ending the job (exit status " << kWatchdogExitCode << "); " << advice_ << "\n";
  }
  report_(report + end.str());
  {
    // Under hooks_mu_: an owner removing its hook meanwhile waits, then
    // learns that it ran (no destroy after the abort).
    std::lock_guard<std::mutex> lock(hooks_mu_);
    hooks_ran_ = true;
    for (auto& [_, hook] : hooks_) hook();
  }
  abort_(kWatchdogExitCode);
}

}  // namespace pf
