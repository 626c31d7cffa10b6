#include "launch/core/stop_signal.h"

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

// Only for the threads that libraries start before main and so do not block
// the signals (OpenBLAS's pool, at its load; AddressSanitizer's background
// thread): records the signal like the signal thread. Lock-free, so
// async-signal-safe.
extern "C" void on_stop_signal(int sig) { record(sig); }

// This process's threads now (0 where /proc is missing).
long thread_count() {
  std::error_code ec;
  const std::filesystem::directory_iterator tasks("/proc/self/task", ec);
  return ec ? 0 : static_cast<long>(std::distance(tasks, std::filesystem::directory_iterator()));
}

// The threads running when this program's own static objects are made:
// those of the libraries, started as they were loaded. Every later thread
// is the program's and must start after install_stop_handlers().
const long g_threads_before_main = thread_count();

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
    // A thread of the program's that runs already would keep the signals
    // unblocked, and a signal could interrupt its work (what corrupted the
    // heap before).
    const long threads = thread_count();
    PF_REQUIRE(ValueError, threads <= g_threads_before_main,
               "install_stop_handlers() must run before the program starts a thread; "
                   << threads << " threads run, " << g_threads_before_main << " of them the libraries' from before main");
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
      pthread_setname_np(pthread_self(), kStopThreadName);
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
