// Runs CUDA kernel code on the CPU, for tests of kernels whose GPU has not run
// them: included (before the kernel headers) by a host translation unit, it
// defines the CUDA keywords and the block builtins the kernels use
// (threadIdx, blockIdx, blockDim, gridDim, __syncthreads, __shfl_xor_sync,
// dynamic shared memory through PF_FAVOR_SHARED_FLOATS) and a launch that
// runs every block's threads as cooperative fibers (ucontext) on the calling
// thread, blocks one after another.
//
// A fiber runs until it reaches a barrier (__syncthreads, or the warp barriers
// inside __shfl_xor_sync), then the next one runs. So every thread finishes
// all its work between two barriers before any other thread starts its own:
// a missing __syncthreads between writes and reads by other threads (or reads
// and overwrites) gives wrong results here, deterministically. A barrier that
// not every thread of the block (or warp) reaches aborts with a message.
// Not emulated: tensor-core code (__CUDA_ARCH__ is undefined, so the kernels
// take their fp32 paths), atomics, memory fences between blocks.
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __align__(n) alignas(n)

namespace pf_emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct Barrier {
  int needed = 0, arrived = 0;
  int64_t generation = 0;
};

struct Fiber {
  ucontext_t context;
  bool done = false;
};

// One block in flight: its fibers, barriers, shuffle slots and shared memory.
struct Block {
  ucontext_t scheduler;
  std::vector<Fiber> fibers;
  unsigned current = 0;
  Dim3 block_idx, block_dim, grid_dim;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<float> shuffle;
  std::vector<float> shared;
  std::function<void()> body;
  int64_t progress = 0;  // barrier completions, to tell a deadlock from waiting
};

// The block being run on this thread (the emulator's only state; a launch
// sets and clears it).
inline Block*& current_block() {
  static thread_local Block* block = nullptr;
  return block;
}

inline void yield_to_scheduler() {
  Block& b = *current_block();
  swapcontext(&b.fibers[b.current].context, &b.scheduler);
}

inline void wait(Barrier& bar) {
  const int64_t gen = bar.generation;
  if (++bar.arrived == bar.needed) {
    bar.arrived = 0;
    ++bar.generation;
    ++current_block()->progress;
    return;
  }
  while (bar.generation == gen) yield_to_scheduler();
}

inline void fiber_entry() {
  Block& b = *current_block();
  b.body();
  b.fibers[b.current].done = true;
  swapcontext(&b.fibers[b.current].context, &b.scheduler);
}

constexpr size_t kFiberStack = 256 * 1024;

// Runs block `idx` of body() to completion: `block_dim.x` fibers on the
// stacks of `stacks` (one each, kFiberStack bytes, reused block after block),
// `shared_bytes` of shared memory filled with NaN (a read of shared memory no
// thread wrote shows in the results).
inline void run_block(Dim3 idx, Dim3 grid, Dim3 block_dim, size_t shared_bytes, const std::function<void()>& body,
                      std::vector<std::unique_ptr<char[]>>& stacks) {
  const unsigned threads = block_dim.x;
  Block b;
  b.block_idx = idx;
  b.block_dim = block_dim;
  b.grid_dim = grid;
  b.block_barrier.needed = static_cast<int>(threads);
  b.warp_barriers.resize((threads + 31) / 32);
  for (unsigned w = 0; w < b.warp_barriers.size(); ++w)
    b.warp_barriers[w].needed = static_cast<int>(std::min(32u, threads - 32 * w));
  b.shuffle.assign(threads, 0.f);
  b.shared.assign((shared_bytes + sizeof(float) - 1) / sizeof(float), NAN);
  b.body = body;
  b.fibers.resize(threads);
  current_block() = &b;
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stacks[t].get();
    f.context.uc_stack.ss_size = kFiberStack;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_entry, 0);
  }
  auto finished = [&] {
    int64_t count = 0;
    for (const Fiber& f : b.fibers) count += f.done ? 1 : 0;
    return count;
  };
  for (int64_t done = 0; done < threads;) {
    const int64_t progress = b.progress, done_before = done;
    for (unsigned t = 0; t < threads; ++t) {
      if (b.fibers[t].done) continue;
      b.current = t;
      swapcontext(&b.scheduler, &b.fibers[t].context);
    }
    done = finished();
    if (done < threads && b.progress == progress && done == done_before) {
      std::fprintf(stderr, "cuda_block_emulator: block (%u, %u): a barrier not every thread reaches\n", idx.x, idx.y);
      std::abort();
    }
  }
  current_block() = nullptr;
}

// Runs body() once per thread of every block of a grid, blocks in order.
inline void launch(Dim3 grid, Dim3 block_dim, size_t shared_bytes, const std::function<void()>& body) {
  std::vector<std::unique_ptr<char[]>> stacks(block_dim.x);
  for (auto& stack : stacks) stack.reset(new char[kFiberStack]);
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) run_block(Dim3{bx, by, 0}, grid, block_dim, shared_bytes, body, stacks);
}

inline Dim3 thread_idx() { return Dim3{current_block()->current, 0, 0}; }

}  // namespace pf_emu

#define threadIdx (::pf_emu::thread_idx())
#define blockIdx (::pf_emu::current_block()->block_idx)
#define blockDim (::pf_emu::current_block()->block_dim)
#define gridDim (::pf_emu::current_block()->grid_dim)
#define PF_FAVOR_SHARED_FLOATS(name) float* name = ::pf_emu::current_block()->shared.data()

inline void __syncthreads() { ::pf_emu::wait(::pf_emu::current_block()->block_barrier); }

inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  ::pf_emu::Block& b = *::pf_emu::current_block();
  const unsigned t = b.current, warp = t / 32;
  b.shuffle[t] = v;
  ::pf_emu::wait(b.warp_barriers[warp]);
  const float out = b.shuffle[warp * 32 + ((t % 32) ^ static_cast<unsigned>(lane_mask))];
  ::pf_emu::wait(b.warp_barriers[warp]);
  return out;
}

inline int min(int a, int b) { return a < b ? a : b; }
