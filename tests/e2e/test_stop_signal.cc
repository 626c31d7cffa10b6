// Stop signals sent to the process while the CPU GEMM computes
// (launch/core/stop_signal.h). oneDNN's JIT sgemm kernels move the stack
// pointer into a heap workspace while they run; a signal handler that runs on
// such a thread has its signal frame written below that pointer, into the
// heap (docs/testing.md#stop-signals). install_stop_handlers() must therefore
// keep every thread the program starts from running a handler: the thread of
// its own takes the signals with sigwait().
//
// One test per binary: install_stop_handlers() must run before any thread of
// the program starts.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "launch/core/stop_signal.h"

namespace {

// Threads on which a handler ran (their kernel thread ids); at most kSlots.
constexpr int kSlots = 256;
std::atomic<long> handler_tids[kSlots];
std::atomic<int> handler_runs{0};

// Async-signal-safe: one system call and lock-free stores.
extern "C" void note_handler_thread(int) {
  const int slot = handler_runs.fetch_add(1);
  if (slot < kSlots) handler_tids[slot].store(static_cast<long>(::syscall(SYS_gettid)));
}

std::set<long> task_ids() {
  std::set<long> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    ids.insert(std::stol(e.path().filename()));
  return ids;
}

TEST(StopSignal, SignalsDuringGemmsRunNoHandlerOnAComputingThread) {
  // Threads that libraries started as they were loaded: they cannot block the
  // signals and may run the handler; they run no GEMM of this test.
  std::set<long> library_threads = task_ids();
  library_threads.erase(static_cast<long>(::getpid()));
  pf::install_stop_handlers();
  ASSERT_FALSE(pf::stop_requested());
  // The same disposition, with the thread it runs on noted: any run on a
  // thread of this program (the main thread, the GEMM's OpenMP threads, the
  // sender) fails the test.
  struct sigaction sa {};
  sa.sa_handler = note_handler_thread;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);

  // GEMMs of the size the model runs (oneDNN's JIT kernels take these;
  // OpenBLAS's where the build has no oneDNN), on the main thread and the
  // backend's threads, while another thread signals the process (as kill,
  // srun and Slurm's --signal do) every 200 microseconds.
  const int64_t n = 256;
  const std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f);
  std::vector<float> c(n * n);
  std::atomic<bool> done{false};
  std::atomic<long> sent{0};
  std::thread sender([&] {
    while (!done.load()) {
      ::kill(::getpid(), SIGUSR1);
      sent.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  long calls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500) || sent.load() < 100) {
    pf::gemm_f32_host(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    ++calls;
  }
  done = true;
  sender.join();
  EXPECT_FLOAT_EQ(c[0], 0.5f * 0.25f * n);

  // The signals arrived: the thread of the stop handling recorded one (the
  // handler above records nothing), or, where libraries started threads
  // before main, the kernel may hand them all to those threads.
  const int runs = std::min(handler_runs.load(), kSlots);
  if (library_threads.empty()) {
    EXPECT_TRUE(pf::stop_requested());
    EXPECT_EQ(pf::stop_signal_number(), SIGUSR1);
  } else {
    EXPECT_TRUE(pf::stop_requested() || runs > 0);
  }
  int on_program_threads = 0;
  long example = 0;
  for (int i = 0; i < runs; ++i) {
    if (library_threads.count(handler_tids[i].load())) continue;
    ++on_program_threads;
    example = handler_tids[i].load();
  }
  EXPECT_EQ(on_program_threads, 0) << "handler runs on threads of the program, e.g. thread " << example
                                   << " (main thread " << ::getpid() << "), during " << calls << " GEMMs and "
                                   << sent.load() << " signals";
}

}  // namespace
