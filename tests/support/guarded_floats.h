// Float buffers fenced like device memory under a memory checker, for the
// block emulator (cuda_block_emulator.h): its shared memory and the launch
// sequences' temporaries, and the arguments of emulated calls.
//
// Layout of one mapping, in pages:
//   [no access] [marked NaN ...][usable floats][marked NaN, < 256 bytes] [no access]
// The usable part starts 256-byte aligned (as cudaMalloc's buffers) and ends
// within 256 bytes of the page that may not be accessed. So a read or write
// past the end by more than the slack, or before the start by more than the
// front padding, stops the test with SIGSEGV at the access; a read in the
// slack or padding gives a NaN the arithmetic carries into the results; a
// write there shows in overwritten(). The usable floats start as quiet NaN.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

namespace pf_emu {

// The bits of the NaN that marks the padding: a payload no arithmetic makes.
constexpr uint32_t kGuardBits = 0x7fa0c0deu;
// Alignment of the usable part.
constexpr size_t kGuardAlign = 256;

// The first SIGSEGV of the process prints why it most likely came (an
// access into a GuardedFloats' fence) before the process ends as it would
// have without the handler (SA_RESETHAND: the access runs again, unhandled).
inline void on_guard_fault(int, siginfo_t*, void*) {
  static const char message[] =
      "guarded_floats: SIGSEGV: an access outside the usable floats and padding of a guarded buffer (shared memory, "
      "a temporary or an argument of an emulated kernel), or another wild pointer\n";
  const ssize_t written = write(2, message, sizeof message - 1);
  (void)written;
}
inline void explain_guard_faults() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_guard_fault;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, nullptr);
  });
}

class GuardedFloats {
 public:
  GuardedFloats() = default;
  explicit GuardedFloats(size_t floats) {
    explain_guard_faults();
    Mapping& m = m_;
    m.floats = floats;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t span = round_up(std::max<size_t>(floats, 1) * sizeof(float), kGuardAlign);
    const size_t body = round_up(span, page);
    m.mapped = body + 2 * page;
    void* p = mmap(nullptr, m.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("guarded_floats: mmap");
      std::abort();
    }
    m.base = static_cast<char*>(p);
    if (mprotect(m.base, page, PROT_NONE) != 0 || mprotect(m.base + page + body, page, PROT_NONE) != 0) {
      std::perror("guarded_floats: mprotect");
      std::abort();
    }
    m.front = reinterpret_cast<float*>(m.base + page);
    m.data = reinterpret_cast<float*>(m.base + page + body - span);
    m.back_end = reinterpret_cast<float*>(m.base + page + body);
    fill();
  }
  // The usable floats NaN again, the padding marked again.
  void fill() {
    const float mark = guard_value(), nan = NAN;
    for (float* f = m_.front; f < m_.data; ++f) *f = mark;
    for (float* f = m_.data; f < m_.data + m_.floats; ++f) *f = nan;
    for (float* f = m_.data + m_.floats; f < m_.back_end; ++f) *f = mark;
  }
  GuardedFloats(GuardedFloats&& o) noexcept { std::swap(m_, o.m_); }
  GuardedFloats& operator=(GuardedFloats&& o) noexcept {
    std::swap(m_, o.m_);  // o releases what this held
    return *this;
  }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  ~GuardedFloats() {
    if (m_.base) munmap(m_.base, m_.mapped);
  }

  float* data() const { return m_.data; }
  size_t size() const { return m_.floats; }
  // Whether something wrote the padding; `at` the first such float, counted
  // from data() (negative: before it).
  bool overwritten(int64_t& at) const {
    for (const float* f = m_.front; f < m_.back_end; ++f) {
      if (f == m_.data) f += m_.floats;
      if (f == m_.back_end) break;
      uint32_t bits;
      std::memcpy(&bits, f, sizeof bits);
      if (bits != kGuardBits) {
        at = f - m_.data;
        return true;
      }
    }
    return false;
  }

  static float guard_value() {
    float f;
    std::memcpy(&f, &kGuardBits, sizeof f);
    return f;
  }

 private:
  static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }
  struct Mapping {
    char* base = nullptr;  // the mapping, `mapped` bytes
    size_t mapped = 0;
    float* front = nullptr;     // the padding before data
    float* data = nullptr;      // the usable floats
    float* back_end = nullptr;  // the end of the slack after them
    size_t floats = 0;
  } m_;
};

}  // namespace pf_emu
