// Runs CUDA kernel code on the CPU, for tests of kernels whose GPU has not run
// them: included (before the kernel headers) by a host translation unit, it
// defines the CUDA keywords and the block builtins the kernels use
// (threadIdx, blockIdx, blockDim, gridDim, __syncthreads, __syncwarp, __shfl_xor_sync,
// dynamic shared memory through PF_CUDA_SHARED_FLOATS) and a launch that
// runs every block's threads as cooperative fibers (tests/support/fibers.h)
// on the calling thread, blocks one after another.
//
// A fiber runs until it reaches a barrier (__syncthreads, __syncwarp, or the
// warp barriers inside __shfl_xor_sync and the mma emulation), then the next
// one runs. So every thread finishes
// all its work between two barriers before any other thread starts its own:
// a missing __syncthreads between writes and reads by other threads (or reads
// and overwrites) gives wrong results here, deterministically. A barrier that
// not every thread of the block (or warp) reaches aborts with a message.
// launch() takes the order of the fibers (Schedule): all warps in lockstep
// (the default), or one warp at a time between block barriers, so that one
// warp runs ahead of the others.
// Warp-level PTX (runtime/cuda_mma.cuh, with PF_EMULATED_MMA defined):
// mma.sync m16n8k8 .tf32 and m16n8k16 .bf16, ldmatrix and cp.async, lane by
// lane. Each lane puts its registers (or its row address) in its warp's
// slots, the warp meets at a barrier, and each lane takes exactly the
// elements the PTX ISA's fragment layout gives it: a kernel whose lanes hold
// other elements than the layout says computes another product here, as on
// the hardware. The mma sums are fp32 FMAs in k order over the operands'
// bits (tf32: the low 13 bits ignored; bf16: exact in fp32); the hardware's
// order of the sums is not modelled. cp.async lands at one of the two
// extremes the hardware allows, by Schedule (below): in lockstep a thread's
// copies land at the cp_async_wait() that completes their group, so a read of
// the destination before that wait sees what was there before (NaN in fresh
// shared memory); one warp at a time they land when issued.
// Shared memory and the temporaries of Scratch (below) are GuardedFloats
// (guarded_floats.h): fenced by pages that may not be accessed, with marked
// NaN padding between: an access well past either end stops the test at
// once (SIGSEGV), a read just past it gives NaN results, and a write just
// past it aborts with a message when the block ends (the scratch's when it
// is destroyed), as compute-sanitizer's memcheck would stop the GPU's.
// No atomics: a kernel that calls one does not compile here, so every
// emulated kernel (the deterministic backward passes among them) is free of
// them.
// bf16 storage: __nv_bfloat16 (its bits), __float2bfloat16_rn and
// __bfloat162float as cuda_bf16.h has them, for kernels templated on their
// storage type (PF_EMULATED_BF16 says they exist).
// Not emulated: memory fences between blocks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "tests/support/fibers.h"
#include "tests/support/guarded_floats.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

namespace pf_emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct Barrier {
  int needed = 0, arrived = 0;
  int64_t generation = 0;
};

// One thread's cp.async copies: the open group and the committed ones, oldest first.
struct AsyncCopies {
  struct Copy {
    void* dst;
    const void* src;
    int bytes;
  };
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> committed;
};

struct Fiber {
  Context context;
  bool done = false;
};

// One block in flight: its fibers, barriers, shuffle slots and shared memory.
struct Block {
  Context scheduler;
  std::vector<Fiber> fibers;
  unsigned current = 0;
  Dim3 block_idx, block_dim, grid_dim;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<float> shuffle;
  std::vector<uint32_t> lane_words;  // per thread, 8 words: mma operands, ldmatrix row addresses
  std::vector<AsyncCopies> async;    // per thread: cp.async groups not yet waited for
  float* shared = nullptr;           // the launch's GuardedFloats
  size_t shared_bytes = 0;           // the launch's dynamic shared memory
  std::function<void()> body;
  int64_t progress = 0;       // barrier completions, to tell a deadlock from waiting
  bool eager_copies = false;  // cp.async lands when issued (Schedule::WarpByWarp)
};

// The block being run on this thread (the emulator's only state; a launch
// sets and clears it).
inline Block*& current_block() {
  static thread_local Block* block = nullptr;
  return block;
}

inline void yield_to_scheduler() {
  Block& b = *current_block();
  switch_context(b.fibers[b.current].context, b.scheduler);
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
  switch_context(b.fibers[b.current].context, b.scheduler);
}

constexpr size_t kFiberStack = 256 * 1024;

// The order in which a block's fibers run between barriers. Both are orders
// a GPU may take; a kernel must be right under every order.
//  Lockstep: every fiber in turn, thread 0 first, runs to its next barrier,
//    so all warps advance together (a missing __syncthreads between a
//    thread's write and a lower thread's read shows, or between a thread's
//    read and a lower thread's write).
//  WarpByWarp: one warp runs, through its warp barriers (mma, shuffles,
//    __syncwarp), until it waits at a block barrier or ends; then the next
//    lower warp, the last warp first and each warp's lanes from the last
//    down. So one warp runs ahead of the others, and a missing
//    __syncthreads between one warp's last read of a tile and another's
//    overwrite of it shows too; and in the opposite order to Lockstep, so a
//    missing __syncthreads between a write and a higher thread's read (or a
//    read and a higher thread's write) shows here.
// And the two extremes of when a cp.async copy lands: Lockstep at the
// cp_async_wait that completes its group (the latest: a read before the wait
// sees the old contents), WarpByWarp when it is issued (the earliest: a copy
// into a buffer other warps still read overwrites it at once).
enum class Schedule { Lockstep, WarpByWarp };

// Runs block `idx` of body() to completion: `block_dim.x` fibers on the
// stacks of `stacks` (one each, kFiberStack bytes, reused block after block),
// `shared` as its shared memory, filled with NaN (a read of shared memory no
// thread wrote shows in the results), its padding checked when the block
// ends.
inline void run_block(Dim3 idx, Dim3 grid, Dim3 block_dim, GuardedFloats& shared, const std::function<void()>& body,
                      std::vector<std::unique_ptr<char[]>>& stacks, Schedule schedule) {
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
  b.lane_words.assign(8 * static_cast<size_t>(threads), 0u);
  b.async.assign(threads, AsyncCopies{});
  shared.fill();
  b.shared = shared.data();
  b.shared_bytes = shared.size() * sizeof(float);
  b.body = body;
  b.eager_copies = schedule == Schedule::WarpByWarp;
  b.fibers.resize(threads);
  current_block() = &b;
  for (unsigned t = 0; t < threads; ++t) start(b.fibers[t].context, stacks[t].get(), kFiberStack, fiber_entry);
  auto finished = [&] {
    int64_t count = 0;
    for (const Fiber& f : b.fibers) count += f.done ? 1 : 0;
    return count;
  };
  // Runs the fibers [first, last) each once to its next barrier, in
  // ascending or (down) descending order.
  auto pass = [&](unsigned first, unsigned last, bool down) {
    for (unsigned i = first; i < last; ++i) {
      const unsigned t = down ? first + last - 1 - i : i;
      if (b.fibers[t].done) continue;
      b.current = t;
      switch_context(b.scheduler, b.fibers[t].context);
    }
  };
  for (int64_t done = 0; done < threads;) {
    const int64_t progress = b.progress, done_before = done;
    if (schedule == Schedule::Lockstep) {
      pass(0, threads, false);
    } else {
      for (unsigned w = (threads + 31) / 32; w-- > 0;) {
        for (;;) {  // this warp until it stops: at a block barrier, or done
          const int64_t p = b.progress, f = finished();
          pass(32 * w, std::min(threads, 32 * w + 32), true);
          if (b.progress == p && finished() == f) break;
        }
      }
    }
    done = finished();
    if (done < threads && b.progress == progress && done == done_before) {
      std::fprintf(stderr, "cuda_block_emulator: block (%u, %u): a barrier not every thread reaches\n", idx.x, idx.y);
      std::abort();
    }
  }
  current_block() = nullptr;
  if (int64_t at = 0; shared.overwritten(at)) {
    std::fprintf(stderr,
                 "cuda_block_emulator: block (%u, %u, %u) wrote float %lld of its %zu floats of shared memory\n", idx.x,
                 idx.y, idx.z, static_cast<long long>(at), shared.size());
    std::abort();
  }
}

// The fiber stacks of this thread's launches, kept from launch to launch (a
// test makes thousands of launches; fresh stacks cost more page faults than
// the emulated kernels' work). At least `threads` of them.
inline std::vector<std::unique_ptr<char[]>>& fiber_stacks(unsigned threads) {
  static thread_local std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < threads) stacks.emplace_back(new char[kFiberStack]);
  return stacks;
}

// Runs body() once per thread of every block of a grid, blocks in order.
inline void launch(Dim3 grid, Dim3 block_dim, size_t shared_bytes, const std::function<void()>& body,
                   Schedule schedule = Schedule::Lockstep) {
  std::vector<std::unique_ptr<char[]>>& stacks = fiber_stacks(block_dim.x);
  GuardedFloats shared((shared_bytes + sizeof(float) - 1) / sizeof(float));
  for (unsigned bz = 0; bz < std::max(grid.z, 1u); ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        run_block(Dim3{bx, by, bz}, grid, block_dim, shared, body, stacks, schedule);
}

// A launch sequence's device temporaries on the host: each buffer a
// GuardedFloats (NaN), its padding checked when the Scratch is destroyed
// (after the kernels that use it).
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (int64_t at = 0; buffers_[i].overwritten(at)) {
        std::fprintf(stderr, "cuda_block_emulator: float %lld of scratch buffer %zu (%zu floats) was written\n",
                     static_cast<long long>(at), i, buffers_[i].size());
        std::abort();
      }
  }
  float* buffer(int64_t floats) {
    buffers_.emplace_back(static_cast<size_t>(std::max<int64_t>(floats, 1)));
    bytes_ += static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(floats, 1);
    return buffers_.back().data();
  }
  int64_t bytes() const { return bytes_; }

 private:
  std::vector<GuardedFloats> buffers_;
  int64_t bytes_ = 0;
};

inline Dim3 thread_idx() { return Dim3{current_block()->current, 0, 0}; }

// The calling fiber's warp meets at its warp barrier.
inline void warp_barrier(Block& b) { wait(b.warp_barriers[b.current / 32]); }

}  // namespace pf_emu

#define threadIdx (::pf_emu::thread_idx())
#define blockIdx (::pf_emu::current_block()->block_idx)
#define blockDim (::pf_emu::current_block()->block_dim)
#define gridDim (::pf_emu::current_block()->grid_dim)
#define PF_CUDA_SHARED_FLOATS(name) float* name = ::pf_emu::current_block()->shared

inline void __syncthreads() { ::pf_emu::wait(::pf_emu::current_block()->block_barrier); }

inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) { ::pf_emu::warp_barrier(*::pf_emu::current_block()); }

inline float __shfl_xor_sync(unsigned /*mask*/, float v, int lane_mask) {
  ::pf_emu::Block& b = *::pf_emu::current_block();
  const unsigned t = b.current, warp = t / 32;
  b.shuffle[t] = v;
  ::pf_emu::warp_barrier(b);
  const float out = b.shuffle[warp * 32 + ((t % 32) ^ static_cast<unsigned>(lane_mask))];
  ::pf_emu::warp_barrier(b);
  return out;
}

inline int min(int a, int b) { return a < b ? a : b; }

// ---- warp-level PTX: mma.sync, ldmatrix, cp.async (runtime/cuda_mma.cuh) -------------
#define PF_EMULATED_MMA 1
namespace pf_emu {

inline float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// cvt.rna.tf32.f32 (nearest, ties away; NaN and Inf kept).
inline uint32_t tf32_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (!std::isfinite(x)) return bits;
  return (bits + 0x1000u) & 0xffffe000u;
}

// cvt.rn.bf16 of one float: nearest, ties to even (NaN stays a NaN).
inline uint32_t bf16_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x)) return (bits >> 16) | 0x40u;
  return (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
}
inline uint32_t bf16x2_bits(float lo, float hi) { return bf16_of(lo) | (bf16_of(hi) << 16); }

namespace detail {
// Stops the test unless `bytes` at `shared` lie in the launch's shared memory
// and `shared` (and `global`, when given) are aligned to `bytes`.
inline void require_shared(const Block& blk, const char* what, const void* shared, const void* global, int bytes) {
  const auto size = static_cast<uintptr_t>(bytes);
  const uintptr_t at = reinterpret_cast<uintptr_t>(shared), lo = reinterpret_cast<uintptr_t>(blk.shared);
  const bool inside = at >= lo && at + size <= lo + blk.shared_bytes;
  if (inside && at % size == 0 && reinterpret_cast<uintptr_t>(global) % size == 0) return;
  std::fprintf(stderr, "cuda_block_emulator: block (%u, %u) thread %u: %s of %d bytes %s\n", blk.block_idx.x,
               blk.block_idx.y, blk.current, what, bytes, inside ? "not aligned to its size" : "outside shared memory");
  std::abort();
}
inline uint32_t* warp_words(Block& b) { return b.lane_words.data() + 8 * (b.current / 32 * 32); }
inline unsigned lane() { return current_block()->current % 32; }
// The element (i, j) of a bf16 pair register: the half h of word w of lane l.
inline float bf16_at(const uint32_t* words, unsigned l, unsigned w, unsigned h) {
  return float_of(((words[8 * l + w] >> (16 * h)) & 0xffffu) << 16);
}
}  // namespace detail

namespace detail {
// One warp's D = A B + C over K: each lane's registers go to its slots, and
// each lane sums its four elements of D, reading A (row, k) and B (k, col)
// from the slots of the lanes that hold them (a_at, b_at).
template <typename At, typename Bt>
void warp_mma(int K, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4], At a_at, Bt b_at) {
  Block& blk = *current_block();
  uint32_t* w = warp_words(blk);
  const unsigned l = lane();
  for (int i = 0; i < 4; ++i) w[8 * l + i] = a[i];
  for (int i = 0; i < 2; ++i) w[8 * l + 4 + i] = b[i];
  warp_barrier(blk);
  const unsigned g = l / 4, t = l % 4;
  float out[4];
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i / 2), col = 2 * t + (i % 2);
    float acc = c[i];
    for (unsigned k = 0; k < static_cast<unsigned>(K); ++k) acc = std::fma(a_at(w, row, k), b_at(w, k, col), acc);
    out[i] = acc;
  }
  warp_barrier(blk);  // every lane has read the slots before they are reused
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}
}  // namespace detail

// D = A B + C, A 16x8 and B 8x8 in tf32 registers (layouts: runtime/cuda_mma.cuh);
// the hardware reads 19 bits of each.
inline void mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  detail::warp_mma(
      8, d, a, b, c,
      [](const uint32_t* w, unsigned row, unsigned k) {
        return float_of(w[8 * ((row % 8) * 4 + k % 4) + (row / 8) + 2 * (k / 4)] & 0xffffe000u);
      },
      [](const uint32_t* w, unsigned k, unsigned col) {
        return float_of(w[8 * (col * 4 + k % 4) + 4 + k / 4] & 0xffffe000u);
      });
}

// D = A B + C, A 16x16 and B 16x8 in bf16 pair registers.
inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  detail::warp_mma(
      16, d, a, b, c,
      [](const uint32_t* w, unsigned row, unsigned k) {
        return detail::bf16_at(w, (row % 8) * 4 + (k % 8) / 2, (row / 8) + 2 * (k / 8), k % 2);
      },
      [](const uint32_t* w, unsigned k, unsigned col) {
        return detail::bf16_at(w, col * 4 + (k % 8) / 2, 4 + k / 8, k % 2);
      });
}

// ldmatrix.m8n8.x{n}[.trans].b16: lane 8i + r gives row r of tile i; lane l
// receives, per tile, the pair (l / 4, 2 (l % 4) .. + 1), or with `trans` the
// pair (2 (l % 4) .. + 1, l / 4) read down a column.
inline void ldmatrix(int n, bool trans, uint32_t* r, const void* row) {
  Block& blk = *current_block();
  uint32_t* w = detail::warp_words(blk);
  const unsigned l = detail::lane();
  const uintptr_t address = reinterpret_cast<uintptr_t>(row);
  // The PTX ISA: each row address of the lanes that give one is 16-byte
  // aligned, in shared memory (its 16 bytes within the launch's).
  if (l < 8u * static_cast<unsigned>(n)) detail::require_shared(blk, "ldmatrix row", row, nullptr, 16);
  std::memcpy(&w[8 * l], &address, sizeof address);
  warp_barrier(blk);
  auto row_of = [&](unsigned lane_giving) {
    uintptr_t p;
    std::memcpy(&p, &w[8 * lane_giving], sizeof p);
    return reinterpret_cast<const uint16_t*>(p);
  };
  uint32_t got[4];
  for (int i = 0; i < n; ++i) {
    uint16_t lo, hi;
    if (!trans) {
      const uint16_t* src = row_of(8 * i + l / 4);
      lo = src[2 * (l % 4)];
      hi = src[2 * (l % 4) + 1];
    } else {
      lo = row_of(8 * i + 2 * (l % 4))[l / 4];
      hi = row_of(8 * i + 2 * (l % 4) + 1)[l / 4];
    }
    got[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  warp_barrier(blk);
  for (int i = 0; i < n; ++i) r[i] = got[i];
}

inline void cp_async(void* dst, const void* src, int bytes) {
  Block& blk = *current_block();
  // The PTX ISA: both addresses aligned to the size, the destination in shared memory.
  detail::require_shared(blk, "cp.async", dst, src, bytes);
  if (blk.eager_copies) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  blk.async[blk.current].open.push_back(AsyncCopies::Copy{dst, src, bytes});
}
inline void cp_async_commit() {
  Block& blk = *current_block();
  AsyncCopies& a = blk.async[blk.current];
  a.committed.push_back(std::move(a.open));
  a.open.clear();
}
// Completes this thread's committed groups but the `pending` newest.
inline void cp_async_wait(int pending) {
  Block& blk = *current_block();
  AsyncCopies& a = blk.async[blk.current];
  while (static_cast<int>(a.committed.size()) > pending) {
    for (const AsyncCopies::Copy& c : a.committed.front()) std::memcpy(c.dst, c.src, static_cast<size_t>(c.bytes));
    a.committed.erase(a.committed.begin());
  }
}

}  // namespace pf_emu

// bf16 storage (cuda_bf16.h's names; the bits, rounded to nearest even).
#define PF_EMULATED_BF16 1
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return {static_cast<uint16_t>(pf_emu::bf16_of(x))}; }
inline float __bfloat162float(__nv_bfloat16 x) { return pf_emu::float_of(static_cast<uint32_t>(x.bits) << 16); }
