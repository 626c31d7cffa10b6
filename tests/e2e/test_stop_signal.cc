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
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "launch/core/stop_signal.h"

namespace {

// Threads that libraries started before main (they cannot block the signals
// and may run the handler), fixed before any signal is sent.
constexpr int kMaxLibraryThreads = 64;
long library_tids[kMaxLibraryThreads];
int library_count = 0;
std::atomic<long> runs_on_library_threads{0}, runs_on_program_threads{0};
std::atomic<long> program_thread_example{0};

// Async-signal-safe: one system call, reads of fixed memory, lock-free
// stores; errno as it was.
extern "C" void count_handler_run(int) {
  const int saved = errno;
  const long tid = static_cast<long>(::syscall(SYS_gettid));
  bool library = false;
  for (int i = 0; i < library_count; ++i) library = library || library_tids[i] == tid;
  if (library) {
    runs_on_library_threads.fetch_add(1);
  } else {
    runs_on_program_threads.fetch_add(1);
    program_thread_example.store(tid);
  }
  errno = saved;
}

std::set<long> task_ids() {
  std::set<long> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    ids.insert(std::stol(e.path().filename()));
  return ids;
}

std::string task_file(long tid, const char* name) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/" + name);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The thread's name (comm, without its newline).
std::string task_name(long tid) {
  std::string name = task_file(tid, "comm");
  if (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

// The thread's blocked signals (SigBlk of its status), 0 when unreadable.
uint64_t blocked_mask(long tid) {
  std::istringstream status(task_file(tid, "status"));
  for (std::string line; std::getline(status, line);)
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  return 0;
}

TEST(StopSignal, SignalsDuringGemmsRunNoHandlerOnAComputingThread) {
  // Library threads (ctest runs this with OPENBLAS_NUM_THREADS=1: OpenBLAS
  // starts no pool then, so there are none unless a sanitizer starts one).
  for (long tid : task_ids())
    if (tid != static_cast<long>(::getpid()) && library_count < kMaxLibraryThreads) library_tids[library_count++] = tid;
  ASSERT_LT(library_count, kMaxLibraryThreads);
  pf::install_stop_handlers();
  ASSERT_FALSE(pf::stop_requested());
  // The same disposition, counting the threads it runs on: a run on a thread
  // of the program (the main thread, the GEMM's OpenMP threads, the sender)
  // fails the test.
  struct sigaction sa {};
  sa.sa_handler = count_handler_run;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);

  // GEMMs of a shape whose oneDNN kernel moves the stack pointer (OpenBLAS's
  // where the build has no oneDNN), on the main thread and the backend's
  // threads, while another thread signals the process (as kill, srun and
  // Slurm's --signal do) every 200 microseconds.
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
  // Every thread of the program, the GEMM's pool included (alive now),
  // blocks the stop signals; only the stop thread waits for them.
  uint64_t stop_bits = 0;
  for (int sig : pf::kStopSignals) stop_bits |= uint64_t{1} << (sig - 1);
  int program_threads = 0, stop_threads = 0;
  for (long tid : task_ids()) {
    if (std::count(library_tids, library_tids + library_count, tid)) continue;
    if (task_name(tid) == pf::kStopThreadName) {
      ++stop_threads;
      continue;
    }
    ++program_threads;
    EXPECT_EQ(blocked_mask(tid) & stop_bits, stop_bits)
        << "thread " << tid << " (" << task_name(tid) << ") does not block the stop signals";
  }
  EXPECT_EQ(stop_threads, 1);
  EXPECT_GE(program_threads, 2);  // the main thread and the sender at least
  done = true;
  sender.join();
  EXPECT_FLOAT_EQ(c[0], 0.5f * 0.25f * n);

  // The signals arrived: the stop thread recorded one (the handler above
  // records nothing), or, where libraries started threads before main, the
  // kernel may hand them all to those threads.
  if (library_count == 0) {
    EXPECT_TRUE(pf::stop_requested());
    EXPECT_EQ(pf::stop_signal_number(), SIGUSR1);
  } else {
    EXPECT_TRUE(pf::stop_requested() || runs_on_library_threads.load() > 0);
  }
  EXPECT_EQ(runs_on_program_threads.load(), 0)
      << "handler runs on threads of the program, e.g. thread " << program_thread_example.load() << " (main thread "
      << ::getpid() << "), during " << calls << " GEMMs and " << sent.load() << " signals";
}

}  // namespace
