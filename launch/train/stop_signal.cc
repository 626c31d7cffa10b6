#include "launch/train/stop_signal.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <thread>

#include "runtime/check.h"
#include "runtime/errors.h"

namespace pf {
namespace {

// The signal received first, 0 while none: written by the signal thread
// (or the fallback handler below), read by any thread.
std::atomic<int> g_stop_signal{0};

void record(int sig) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, sig);
}

// Only for a thread that started before install_stop_handlers() and so does
// not block the signals (AddressSanitizer's own background thread, which
// computes nothing): records it like the signal thread. Lock-free, so
// async-signal-safe.
extern "C" void on_stop_signal(int sig) { record(sig); }

// Threads the runtime starts before main: AddressSanitizer's background thread.
constexpr long kThreadsBeforeMain =
#if defined(__SANITIZE_ADDRESS__)
    2;
#else
    1;
#endif

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

}  // namespace

void install_stop_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A thread that runs already would keep the signals unblocked, and a
    // signal could interrupt its work (what corrupted the heap before).
    std::error_code ec;
    const std::filesystem::directory_iterator tasks("/proc/self/task", ec);
    if (!ec) {
      const auto threads = std::distance(tasks, std::filesystem::directory_iterator());
      PF_REQUIRE(ValueError, threads <= kThreadsBeforeMain,
                 "install_stop_handlers() must run before any other thread starts; " << threads
                                                                                     << " threads run already");
    }
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
    const sigset_t set = stop_set();
    const int blocked = pthread_sigmask(SIG_BLOCK, &set, nullptr);
    PF_REQUIRE(ValueError, blocked == 0, "blocking the stop signals failed: " << std::strerror(blocked));
    // The one thread that takes the stop signals: sigwait() returns each as
    // an ordinary value, so no handler ever interrupts another thread.
    std::thread([set] {
      for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) == 0) record(sig);
      }
    }).detach();
  });
}

bool stop_requested() { return g_stop_signal.load() != 0; }
int stop_signal_number() { return g_stop_signal.load(); }

}  // namespace pf
