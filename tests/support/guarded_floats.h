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
  explicit GuardedFloats(size_t floats) : floats_(floats) {
    explain_guard_faults();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t span = round_up(std::max<size_t>(floats, 1) * sizeof(float), kGuardAlign);
    const size_t body = round_up(span, page);
    mapped_ = body + 2 * page;
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("guarded_floats: mmap");
      std::abort();
    }
    base_ = static_cast<char*>(p);
    if (mprotect(base_, page, PROT_NONE) != 0 || mprotect(base_ + page + body, page, PROT_NONE) != 0) {
      std::perror("guarded_floats: mprotect");
      std::abort();
    }
    front_ = reinterpret_cast<float*>(base_ + page);
    data_ = reinterpret_cast<float*>(base_ + page + body - span);
    back_end_ = reinterpret_cast<float*>(base_ + page + body);
    fill();
  }
  // The usable floats NaN again, the padding marked again.
  void fill() {
    const float mark = guard_value(), nan = NAN;
    for (float* f = front_; f < data_; ++f) *f = mark;
    for (float* f = data_; f < data_ + floats_; ++f) *f = nan;
    for (float* f = data_ + floats_; f < back_end_; ++f) *f = mark;
  }
  GuardedFloats(GuardedFloats&& o) noexcept { *this = std::move(o); }
  GuardedFloats& operator=(GuardedFloats&& o) noexcept {
    if (this != &o) {
      release();
      std::swap(base_, o.base_);
      std::swap(mapped_, o.mapped_);
      std::swap(front_, o.front_);
      std::swap(data_, o.data_);
      std::swap(back_end_, o.back_end_);
      std::swap(floats_, o.floats_);
    }
    return *this;
  }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  ~GuardedFloats() { release(); }

  float* data() const { return data_; }
  size_t size() const { return floats_; }
  // Whether something wrote the padding; `at` the first such float, counted
  // from data() (negative: before it).
  bool overwritten(int64_t& at) const {
    for (const float* f = front_; f < back_end_; ++f) {
      if (f == data_) f += floats_;
      if (f == back_end_) break;
      uint32_t bits;
      std::memcpy(&bits, f, sizeof bits);
      if (bits != kGuardBits) {
        at = f - data_;
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
  void release() {
    if (base_) munmap(base_, mapped_);
    base_ = nullptr;
    mapped_ = 0;
    front_ = data_ = back_end_ = nullptr;
    floats_ = 0;
  }
  char* base_ = nullptr;
  size_t mapped_ = 0;
  float* front_ = nullptr;     // the padding before data_
  float* data_ = nullptr;      // the usable floats
  float* back_end_ = nullptr;  // the end of the slack after them
  size_t floats_ = 0;
};

}  // namespace pf_emu
