// Stack switching for the block emulator (fibers.h).
#include "tests/support/fibers.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace pf_emu {

void start(UcontextContext& c, char* stack, std::size_t bytes, FiberEntry entry) {
  if (getcontext(&c.context) != 0) {
    std::perror("fibers: getcontext");
    std::abort();
  }
  c.context.uc_stack.ss_sp = stack;
  c.context.uc_stack.ss_size = bytes;
  c.context.uc_link = nullptr;
  makecontext(&c.context, entry, 0);
}

void switch_context(UcontextContext& save, UcontextContext& resume) {
  if (swapcontext(&save.context, &resume.context) != 0) {
    std::perror("fibers: swapcontext");
    std::abort();
  }
}

}  // namespace pf_emu

#if PF_EMU_ASM_CONTEXT
// pf_emu_asm_switch(save_sp, resume_sp): pushes the callee-saved registers
// and an 8-byte word holding MXCSR (low 4 bytes) and the x87 control word,
// stores the stack pointer in *save_sp, loads resume_sp and pops the same
// frame in reverse; `ret` then continues where the resumed context called
// the switch (or, the first time, enters the fiber: start() lays out the
// frame).
asm(R"(
    .text
    .p2align 4
    .globl pf_emu_asm_switch
    .type pf_emu_asm_switch, @function
pf_emu_asm_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size pf_emu_asm_switch, .-pf_emu_asm_switch
)");

extern "C" void pf_emu_asm_switch(void** save_sp, void* resume_sp);

namespace pf_emu {

void start(AsmContext& c, char* stack, std::size_t bytes, FiberEntry entry) {
  // The frame pf_emu_asm_switch pops, from the top of the stack down: a zero
  // return address for entry (it never returns; a backtrace ends there), the
  // address `ret` jumps to (entry, at a 16-byte boundary, so that entry starts
  // with the stack as after a call), rbp, rbx, r12-r15 as zero, and the
  // caller's MXCSR and x87 control word.
  auto top = reinterpret_cast<std::uintptr_t>(stack + bytes) & ~std::uintptr_t{15};
  auto* slot = reinterpret_cast<std::uint64_t*>(top);
  *--slot = 0;
  *--slot = reinterpret_cast<std::uint64_t>(entry);
  for (int i = 0; i < 6; ++i) *--slot = 0;
  std::uint32_t mxcsr = 0;
  std::uint16_t fcw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  *--slot = static_cast<std::uint64_t>(mxcsr) | (static_cast<std::uint64_t>(fcw) << 32);
  c.sp = slot;
}

void switch_context(AsmContext& save, AsmContext& resume) { pf_emu_asm_switch(&save.sp, resume.sp); }

}  // namespace pf_emu
#endif
