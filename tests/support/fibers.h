// Switching the calling thread between stacks, for the block emulator
// (cuda_block_emulator.h), which runs every CUDA thread of a block as a
// fiber and switches at each barrier: millions of switches per test.
//
// Two implementations of one interface:
//   UcontextContext  getcontext/makecontext/swapcontext (POSIX; any
//                    architecture). glibc's swapcontext also saves and
//                    restores the signal mask, a system call per switch.
//   AsmContext       x86-64 only: saves what the System V ABI says a call
//                    preserves (rbx, rbp, r12-r15, the stack pointer, MXCSR
//                    and the x87 control word) and nothing else; no system
//                    call. Compiled where __x86_64__ is defined.
// `Context` is the fast one where it exists, else the ucontext one. Both pass
// the same tests (tests/unit/test_fibers.cc).
//
// Usage: start(c, stack, bytes, entry) prepares a context that, when first
// switched to, calls entry() on `stack`; entry must never return (it switches
// away for the last time instead). switch_context(save, resume) saves the
// caller into `save` and resumes `resume`; it returns when something switches
// back to `save`.
#pragma once

#include <ucontext.h>

#include <cstddef>

namespace pf_emu {

using FiberEntry = void (*)();

struct UcontextContext {
  ucontext_t context;
};
void start(UcontextContext& c, char* stack, std::size_t bytes, FiberEntry entry);
void switch_context(UcontextContext& save, UcontextContext& resume);

#if defined(__x86_64__)
#define PF_EMU_ASM_CONTEXT 1
struct AsmContext {
  void* sp = nullptr;  // the saved stack pointer; the saved registers lie above it
};
void start(AsmContext& c, char* stack, std::size_t bytes, FiberEntry entry);
void switch_context(AsmContext& save, AsmContext& resume);
using Context = AsmContext;
#else
using Context = UcontextContext;
#endif

}  // namespace pf_emu
