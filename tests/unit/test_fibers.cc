// The block emulator's stack switching (tests/support/fibers.h), for each
// implementation this machine compiles: fibers run in the order they are
// switched to, keep their locals across switches while other fibers compute,
// start with an ABI-aligned stack, keep their own floating-point rounding mode,
// and run deep calls on their own stacks.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "tests/support/fibers.h"

namespace pf_emu {
namespace {

// A scheduler and its fibers; the fibers' entry finds them through `current`
// (an entry takes no arguments).
template <typename C>
struct Harness {
  static constexpr std::size_t kStack = 256 * 1024;
  using Body = void (*)(Harness&, int);

  C scheduler;
  std::vector<C> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<bool> done;
  int running = -1;
  Body body = nullptr;
  std::vector<int> log;  // what the fibers record, in the order they ran

  static Harness*& current() {
    static thread_local Harness* h = nullptr;
    return h;
  }
  static void entry() {
    Harness& h = *current();
    const int id = h.running;
    h.body(h, id);
    h.done[id] = true;
    switch_context(h.fibers[id], h.scheduler);
  }
  Harness(int n, Body b) : fibers(n), stacks(n), done(n, false), body(b) {
    current() = this;
    for (int i = 0; i < n; ++i) {
      stacks[i].reset(new char[kStack]);
      start(fibers[i], stacks[i].get(), kStack, &Harness::entry);
    }
  }
  ~Harness() { current() = nullptr; }
  void yield(int id) { switch_context(fibers[id], scheduler); }
  // Fiber i once, until it yields or ends.
  void resume(int i) {
    running = i;
    switch_context(scheduler, fibers[i]);
  }
  // Every fiber in turn until all have ended.
  void run_all() {
    for (bool any = true; any;) {
      any = false;
      for (int i = 0; i < static_cast<int>(fibers.size()); ++i)
        if (!done[i]) {
          resume(i);
          any = true;
        }
    }
  }
};

template <typename C>
class Fibers : public ::testing::Test {};
#if PF_EMU_ASM_CONTEXT
using Contexts = ::testing::Types<UcontextContext, AsmContext>;
#else
using Contexts = ::testing::Types<UcontextContext>;
#endif
TYPED_TEST_SUITE(Fibers, Contexts);

TYPED_TEST(Fibers, RunInTheOrderTheyAreSwitchedTo) {
  using H = Harness<TypeParam>;
  H h(3, [](H& self, int id) {
    for (int step = 0; step < 4; ++step) {
      self.log.push_back(10 * id + step);
      self.yield(id);
    }
  });
  h.run_all();
  std::vector<int> expected;
  for (int step = 0; step < 4; ++step)
    for (int id = 0; id < 3; ++id) expected.push_back(10 * id + step);
  EXPECT_EQ(h.log, expected);
}

// Many values live across each switch (the compiler keeps them in the
// callee-saved registers or on the fiber's stack) while the other fibers
// compute other values with the same code.
// (Unsigned, so that the products wrap instead of overflowing.)
template <typename H>
__attribute__((noinline)) uint64_t mix_across_switches(H& h, int id) {
  const auto u = static_cast<uint64_t>(id);
  uint64_t a = u + 1, b = 3 * u + 7, c = 5 * u + 11, d = 7 * u + 13, e = 11 * u + 17, f = 13 * u + 19;
  double x = id + 0.5, y = 2.0 * id + 0.25;
  for (int round = 0; round < 50; ++round) {
    h.yield(id);
    a = a * 31 + b;
    b = b * 37 + c;
    c = c * 41 + d;
    d = d * 43 + e;
    e = e * 47 + f;
    f = f * 53 + a;
    x = x * 0.5 + y;
    y = y * 0.25 + x;
  }
  return a ^ b ^ c ^ d ^ e ^ f ^ static_cast<uint64_t>(x * 1e6) ^ static_cast<uint64_t>(y * 1e6);
}

template <typename H>
uint64_t mixed_alone(int id) {
  // The same arithmetic without switches.
  struct NoSwitch {
    void yield(int) {}
  } none;
  return mix_across_switches(none, id);
}

TYPED_TEST(Fibers, KeepTheirLocalsWhileOthersRun) {
  using H = Harness<TypeParam>;
  H h(4, [](H& self, int id) { self.log.push_back(static_cast<int>(mix_across_switches(self, id) & 0x7fffffff)); });
  h.run_all();
  ASSERT_EQ(h.log.size(), 4u);
  for (int id = 0; id < 4; ++id) EXPECT_EQ(h.log[id], static_cast<int>(mixed_alone<H>(id) & 0x7fffffff)) << id;
}

// A 16-byte aligned local of a called function: the compiler assumes the
// ABI's alignment at every call and does not realign for it, so a fiber
// entered with a misaligned stack shows here.
__attribute__((noinline)) std::uintptr_t aligned_local_address() {
  alignas(16) volatile char local[16] = {};
  local[0] = 1;
  return reinterpret_cast<std::uintptr_t>(&local[0]);
}

TYPED_TEST(Fibers, StartWithAnAlignedStack) {
  using H = Harness<TypeParam>;
  H h(2, [](H& self, int id) {
    self.log.push_back(static_cast<int>(aligned_local_address() % 16));
    self.yield(id);
    self.log.push_back(static_cast<int>(aligned_local_address() % 16));
  });
  h.run_all();
  EXPECT_EQ(h.log, (std::vector<int>{0, 0, 0, 0}));
}

// 1/3 in float as the current rounding mode gives it (the division runs in
// the SSE unit, whose mode MXCSR holds; fegetround reads the x87 one).
__attribute__((noinline)) float third() {
  volatile float one = 1.f, three = 3.f;
  return one / three;
}

// Whether both units round as `mode` does: the x87 control word and MXCSR.
bool rounds(int mode, float nearest_third) {
  const bool sse = third() == (mode == FE_DOWNWARD ? std::nextafter(nearest_third, 0.f) : nearest_third);
  return std::fegetround() == mode && sse;
}

TYPED_TEST(Fibers, KeepTheirOwnRoundingMode) {
  using H = Harness<TypeParam>;
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  static const float nearest = third();
  ASSERT_GT(nearest * 3.f, 0.99f);
  H h(2, [](H& self, int id) {
    self.log.push_back(rounds(FE_TONEAREST, nearest));  // inherited from the thread that started it
    if (id == 0) std::fesetround(FE_DOWNWARD);
    self.yield(id);
    self.log.push_back(rounds(id == 0 ? FE_DOWNWARD : FE_TONEAREST, nearest));
    std::fesetround(FE_TONEAREST);
  });
  h.resume(0);
  EXPECT_TRUE(rounds(FE_TONEAREST, nearest)) << "the scheduler's mode after fiber 0 set its own";
  h.resume(1);
  h.run_all();
  EXPECT_EQ(h.log, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_TRUE(rounds(FE_TONEAREST, nearest));
}

__attribute__((noinline)) int64_t deep(int levels) {
  volatile char frame[512];
  frame[0] = 1;
  frame[511] = 1;
  return levels == 0 ? 0 : deep(levels - 1) + frame[0] * frame[511];
}

TYPED_TEST(Fibers, RunDeepCallsOnTheirOwnStacks) {
  using H = Harness<TypeParam>;
  H h(2, [](H& self, int id) {
    self.yield(id);
    self.log.push_back(static_cast<int>(deep(200)));  // about 100 KiB of a 256 KiB stack
  });
  h.run_all();
  EXPECT_EQ(h.log, (std::vector<int>{200, 200}));
}

}  // namespace
}  // namespace pf_emu
