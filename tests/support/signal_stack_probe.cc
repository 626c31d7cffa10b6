// signal_stack_probe BACKEND M N K [TRANS] [SECONDS]: where a signal handler
// runs when it interrupts a CPU sgemm of the given backend (onednn or
// openblas). One thread runs row-major sgemms C[M, N] = op(A) op(B), K the
// inner size, TRANS the transposes of A and B (NN, NT, TN or TT; default NN),
// for SECONDS (default 2); the main thread sends it SIGUSR1 every 200
// microseconds; the handler compares the interrupted stack pointer with the
// thread's stack. Prints the handler runs on and off the stack and how many
// bytes below the interrupted stack pointer the kernel wrote the signal
// frame (the distance from that pointer to the handler's own frame), every
// half second, so that the counts stand when a corrupted heap aborts it.
// A diagnostic of the design of launch/core/stop_signal.h, not a test: the
// result is the library's (docs/testing.md#stop-signals).
#include <pthread.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/gemm/gemm.h"

namespace {

std::atomic<uintptr_t> stack_lo{0}, stack_hi{0};
std::atomic<long> on_stack{0}, off_stack{0};
std::atomic<long> frame_bytes{0};

// The first run off the stack, at once (the heap the frame overwrote may
// abort the process before the next report); write(2) only, as a handler may.
void write_hex(char* out, uintptr_t v) {
  for (int i = 15; i >= 0; --i, v >>= 4) out[i] = "0123456789abcdef"[v & 15];
}
void write_first_off_stack(uintptr_t sp) {
  char line[] =
      "first handler run off the thread's stack: stack pointer 0x0000000000000000, stack 0x0000000000000000"
      "-0x0000000000000000\n";
  char* p = std::strstr(line, "0x");
  write_hex(p + 2, sp);
  p = std::strstr(p + 2, "0x");
  write_hex(p + 2, stack_lo.load());
  p = std::strstr(p + 2, "0x");
  write_hex(p + 2, stack_hi.load());
  ssize_t ignored = ::write(1, line, sizeof line - 1);
  (void)ignored;
}

extern "C" void on_signal(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  const auto* uc = static_cast<const ucontext_t*>(context);
  const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  volatile char here = 0;
  frame_bytes.store(static_cast<long>(sp - reinterpret_cast<uintptr_t>(&here)));
  if (sp >= stack_lo.load() && sp < stack_hi.load()) {
    on_stack.fetch_add(1);
  } else if (off_stack.fetch_add(1) == 0) {
    write_first_off_stack(sp);
  }
  errno = saved_errno;
}

}  // namespace

int main(int argc, char** argv) {
  const auto usage = [&] {
    std::fprintf(stderr, "usage: %s onednn|openblas M N K [NN|NT|TN|TT] [SECONDS]\n", argv[0]);
    return 2;
  };
  if (argc < 5 || (std::strcmp(argv[1], "onednn") != 0 && std::strcmp(argv[1], "openblas") != 0)) return usage();
  const pf::GemmBackend backend =
      std::strcmp(argv[1], "onednn") == 0 ? pf::GemmBackend::OneDNN : pf::GemmBackend::OpenBLAS;
#ifndef PF_HAVE_DNNL
  if (backend == pf::GemmBackend::OneDNN) {
    std::fprintf(stderr, "%s: this build has no oneDNN\n", argv[0]);
    return 2;
  }
#endif
  const int64_t M = std::atol(argv[2]), N = std::atol(argv[3]), K = std::atol(argv[4]);
  const char* trans = argc > 5 ? argv[5] : "NN";
  const double seconds = argc > 6 ? std::atof(argv[6]) : 2.0;
  const bool ta = trans[0] == 'T', tb = trans[1] == 'T';
  if (M < 1 || N < 1 || K < 1 || seconds <= 0 || std::strlen(trans) != 2 || !std::strchr("NT", trans[0]) ||
      !std::strchr("NT", trans[1])) {
    std::fprintf(stderr, "%s: M, N, K must be >= 1, TRANS one of NN NT TN TT, SECONDS > 0\n", argv[0]);
    return usage();
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);

  const std::vector<float> a(M * K, 1.f), b(K * N, 0.5f);
  std::vector<float> c(M * N);
  std::atomic<bool> started{false}, done{false};
  std::atomic<long> calls{0};
  std::thread worker([&] {
    pthread_attr_t attr;
    void* base = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &base, &size);
      pthread_attr_destroy(&attr);
    }
    stack_lo = reinterpret_cast<uintptr_t>(base);
    stack_hi = reinterpret_cast<uintptr_t>(base) + size;
    started = true;
    while (!done.load()) {
      pf::gemm_f32_cpu_with(backend, ta, tb, M, N, K, 1.f, a.data(), ta ? M : K, b.data(), tb ? K : N, 0.f, c.data(),
                            N);
      ++calls;
    }
  });
  while (!started.load()) std::this_thread::yield();
  long sent = 0;
  const auto report = [&] {
    std::printf(
        "backend %s, %ld x %ld x %ld %s: %ld sgemm calls, %ld signals sent, handler runs on the thread's stack %ld, "
        "off it %ld; signal frame %ld bytes below the interrupted stack pointer\n",
        pf::gemm_backend_name(backend), static_cast<long>(M), static_cast<long>(N), static_cast<long>(K), trans,
        calls.load(), sent, on_stack.load(), off_stack.load(), frame_bytes.load());
    std::fflush(stdout);
  };
  const auto t0 = std::chrono::steady_clock::now();
  double next_report = 0.5;
  for (;;) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (t >= seconds) break;
    if (t >= next_report) {
      report();
      next_report += 0.5;
    }
    pthread_kill(worker.native_handle(), SIGUSR1);
    ++sent;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  done = true;
  worker.join();
  report();
  return 0;
}
