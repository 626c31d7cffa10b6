// The CUDA exact softmax attention kernels (kernels/softmax_attention/softmax_attention_cuda.cuh)
// run on the CPU under the block emulator (tests/support/cuda_block_emulator.h):
// the kernel code and launch order the GPU runs, with every output and
// scratch buffer starting as NaN, against the float64 reference and the CPU
// kernel. Covers causal and bidirectional, local windows of 1 key, shorter
// than a tile, one tile, longer than a tile and longer than the sequence,
// sequences of one row, shorter than a tile and of several tiles with a
// short last one, and head sizes that are not multiples of anything (d = 5)
// or fill a warp (d = 33). And the decode kernel (one query per head against
// its keys) the same way.
// The tensor-core kernels (softmax_attention_cuda_mma.cuh, TF32 and bf16)
// run the same kinds of cases lane by lane (the emulator's mma.sync by the
// PTX fragment layouts) against the float64 reference at each precision's
// tolerance, with head sizes on both sides of their 64-column padding, and
// over pieces of rows (one launch sequence for all of them); and on bf16
// storage (the emulator's __nv_bfloat16), bit for bit the fp32-storage run
// rounded.
#include "tests/support/cuda_block_emulator.h"
// The emulator must come first: it defines the CUDA keywords the kernels use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/softmax_attention/softmax_attention_cuda.cuh"
#include "runtime/memory.h"
#include "runtime/row_spans.h"
#include "tests/kernels/softmax_attention_support.h"

namespace pf {
namespace {

using namespace softmax_test;

// The launch policy of softmax_attention_cuda.cuh on the emulator.
class EmulatedLaunch {
 public:
  template <typename... P, typename... A>
  void blocks(void (*kernel)(P...), int64_t blocks, int64_t smem, A... args) {
    ASSERT_GE(smem, 0);
    if (blocks == 0) return;
    ++launches;
    pf_emu::launch(
        {static_cast<unsigned>(blocks), 1, 1}, {static_cast<unsigned>(softmax_cuda::kThreads), 1, 1},
        static_cast<size_t>(smem), [&] { kernel(args...); }, schedule);
  }
  int launches = 0;
  pf_emu::Schedule schedule = pf_emu::Schedule::Lockstep;
};

// Storage of type T (float, or the emulator's __nv_bfloat16) from floats and back.
template <typename T>
std::vector<T> stored_as(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) softmax_cuda::store_f32(&out[i], v[i]);
  return out;
}
template <typename T>
std::vector<float> read_back(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = softmax_cuda::load_f32(&v[i]);
  return out;
}
// Each value rounded to bf16 (as bf16 storage holds it).
std::vector<float> rounded_bf16(const std::vector<float>& v) { return read_back(stored_as<__nv_bfloat16>(v)); }

// The CUDA kernels' forward and backward on storage T (float, or bf16),
// every buffer they write (outputs and the D scratch) starting as NaN: with
// p.tile_math fp32 the SIMT kernels, with TF32 or bf16 the tensor-core ones
// with `stages` buffers of the streamed tiles (four launches each: the
// forward, D, dK and dV, dQ; no atomics); the blocks' fibers
// in the order `schedule` says. The inputs are the rows of the buffers (with
// p.pieces, every row the pieces reach and any between). round_o: the
// backward reads the forward's O rounded to bf16 (as bf16 storage holds it).
template <typename T = float>
Outputs run_emulated(const SoftmaxAttentionParams& p, const Inputs& in,
                     pf_emu::Schedule schedule = pf_emu::Schedule::Lockstep, int stages = 2, bool round_o = false) {
  const auto Q = stored_as<T>(cast_vector<float>(in.Q)), K = stored_as<T>(cast_vector<float>(in.K)),
             V = stored_as<T>(cast_vector<float>(in.V)), dO = stored_as<T>(cast_vector<float>(in.dO));
  const size_t size = Q.size(), rows = size / static_cast<size_t>(p.d);
  const std::vector<T> nan = stored_as<T>(std::vector<float>(size, NAN));
  std::vector<T> O = nan, dQ = nan, dK = nan, dV = nan;
  std::vector<float> lse(rows, NAN), D(rows, NAN);
  const float scale = softmax_attention_scale(p);
  EmulatedLaunch launch;
  launch.schedule = schedule;
  const bool mma = p.tile_math != TileMath::Fp32;
  if (mma)
    softmax_cuda::forward_mma(launch, p, scale, stages, Q.data(), K.data(), V.data(), O.data(), lse.data());
  else
    softmax_cuda::forward(launch, p, scale, Q.data(), K.data(), V.data(), O.data(), lse.data());
  Outputs out{read_back(O), lse, {}, {}, {}};
  const std::vector<T> O_in = round_o ? stored_as<T>(rounded_bf16(out.O)) : O;
  if (mma)
    softmax_cuda::backward_mma(launch, p, scale, stages, Q.data(), K.data(), V.data(), O_in.data(), lse.data(),
                               dO.data(), D.data(), dQ.data(), dK.data(), dV.data());
  else
    softmax_cuda::backward(launch, p, scale, Q.data(), K.data(), V.data(), O_in.data(), lse.data(), dO.data(), D.data(),
                           dQ.data(), dK.data(), dV.data());
  EXPECT_EQ(launch.launches, p.heads * p.n > 0 ? 4 : 0);
  out.dQ = read_back(dQ);
  out.dK = read_back(dK);
  out.dV = read_back(dV);
  return out;
}

// The tensor-core kernels (math TF32 or bf16) on the case of p.
Outputs run_emulated_mma(SoftmaxAttentionParams p, const Inputs& in, TileMath math,
                         pf_emu::Schedule schedule = pf_emu::Schedule::Lockstep, int stages = 2) {
  p.tile_math = math;
  return run_emulated(p, in, schedule, stages);
}

double diff_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s);
}

TEST(SoftmaxCudaEmulated, MatchesFloat64ReferenceAndTheCpu) {
  struct Shape {
    int64_t heads, n, d;
  };
  uint64_t seed = 700;
  for (Shape s : {Shape{2, 1, 5}, Shape{1, 20, 5}, Shape{2, 70, 5}, Shape{1, 97, 33}})
    for (int64_t window : {0, 1, 3, 32, 40, 200})
      for (bool causal : {false, true}) {
        const SoftmaxAttentionParams p = softmax_attention_params(s.heads, s.n, s.d, causal, window);
        const Inputs in = make_inputs(p, ++seed);
        const Outputs got = run_emulated(p, in);
        expect_close(got, run_ref(p, in), 1e-5, describe(p));
        // The CPU kernel sums in another order: the same results to fp32
        // rounding (dQ, dK relative to at least dV's norm: where they vanish,
        // as with one visible key, both hold rounding residue).
        const Outputs cpu = run_cpu(p, in);
        const double grad_norm = test::l2_norm(cpu.dV);
        EXPECT_LE(rel_l2(got.O, cpu.O), 1e-5) << describe(p) << " O";
        EXPECT_LE(rel_l2(got.lse, cpu.lse), 1e-5) << describe(p) << " lse";
        EXPECT_LE(diff_l2(got.dQ, cpu.dQ) / std::max(test::l2_norm(cpu.dQ), grad_norm), 1e-5) << describe(p) << " dQ";
        EXPECT_LE(diff_l2(got.dK, cpu.dK) / std::max(test::l2_norm(cpu.dK), grad_norm), 1e-5) << describe(p) << " dK";
        EXPECT_LE(rel_l2(got.dV, cpu.dV), 1e-5) << describe(p) << " dV";
      }
}

// The tensor-core kernels against the float64 reference: TF32 operands keep
// 11 significant bits, bf16 8; the tolerances are 3e-3 and 2.5e-2 (rel L2 of
// each output; the largest errors on these inputs are 8.8e-4 and 8.4e-3,
// lse and dV). Windows from 1 key to more than the sequence, n from 1 row
// to two tiles with a short last one, d below, at and above the 64-column
// padding (d = 72 runs the 128-column kernels; d = 64 streams its fp32 tiles
// by cp.async). Each case runs with the warps in lockstep and one warp at a
// time (pf_emu::Schedule), so that a missing barrier shows whichever warp
// runs ahead, with the streamed tiles double buffered, and one warp at a
// time with one buffer.
TEST(SoftmaxCudaEmulated, TensorCoreKernelsMatchFloat64Reference) {
  struct Shape {
    int64_t heads, n, d;
  };
  uint64_t seed = 1700;
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
    const double tol = math == TileMath::Bf16 ? 2.5e-2 : 3e-3;
    for (Shape s : {Shape{2, 1, 5}, Shape{1, 70, 16}, Shape{1, 97, 64}, Shape{1, 40, 72}})
      for (int64_t window : {0, 1, 40, 200})
        for (bool causal : {false, true}) {
          const SoftmaxAttentionParams p = softmax_attention_params(s.heads, s.n, s.d, causal, window);
          const Inputs in = make_inputs(p, ++seed);
          const Reference want = run_ref(p, in);
          using pf_emu::Schedule;
          for (auto [schedule, stages] : {std::pair<Schedule, int>{Schedule::Lockstep, 2},
                                          {Schedule::WarpByWarp, 2},
                                          {Schedule::WarpByWarp, 1}}) {
            const Outputs got = run_emulated_mma(p, in, math, schedule, stages);
            expect_close(got, want, tol,
                         describe(p) + " math=" + tile_math_name(math) + " stages=" + std::to_string(stages) +
                             (schedule == Schedule::Lockstep ? " lockstep" : " warp by warp"));
          }
        }
  }
}

// A query that sees one key gives it probability 1, and the backward must
// remake that from the forward's lse to within fp32 rounding (which the
// rounding of P to TF32 or bf16 as an operand absorbs): then dV = P^T dO is
// dO as the tile holds it, bit for bit. One key per query: n = 1,
// or a window of 1 over 97 rows (both modes). d = 5, 72 and 128, where the
// scale 1/sqrt(d) is not a power of two: a forward that rounds scale * q to
// the tile type while the backward scales round(q) makes P = e^delta, off by
// up to a few TF32 or bf16 units.
TEST(SoftmaxCudaEmulated, OneVisibleKeyHasProbabilityOneInTheBackward) {
  uint64_t seed = 2300;
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16})
    for (int64_t d : {5, 72, 128})
      for (bool causal : {false, true})
        for (auto [n, window] : {std::pair<int64_t, int64_t>{1, 0}, {97, 1}}) {
          const SoftmaxAttentionParams p = softmax_attention_params(3, n, d, causal, window);
          const Inputs in = make_inputs(p, ++seed);
          const Outputs got = run_emulated_mma(p, in, math);
          int64_t wrong = 0;
          for (size_t i = 0; i < got.dV.size(); ++i) {
            const float dO = static_cast<float>(in.dO[i]);
            const float held = math == TileMath::Tf32 ? pf_emu::float_of(pf_emu::tf32_bits(dO))
                                                      : pf_emu::float_of(pf_emu::bf16_of(dO) << 16);
            wrong += got.dV[i] != held;
          }
          EXPECT_EQ(wrong, 0) << describe(p) << " math=" << tile_math_name(math) << ": dV != dO as the tile holds it";
        }
}

// Tiles streamed into buffers that earlier tiles filled: four key and query
// tiles a block (n = 200), double and single buffered, by cp.async (d = 64
// and 128, fp32: 16 and 32 copies a row) and by loads (d = 16), one warp at
// a time (so a warp that refills a buffer before the others have read it
// shows) and in lockstep.
TEST(SoftmaxCudaEmulated, TensorCoreStreamsReuseTheirBuffers) {
  uint64_t seed = 1900;
  for (int64_t d : {16, 64, 128})
    for (bool causal : {false, true}) {
      const SoftmaxAttentionParams p = softmax_attention_params(1, 200, d, causal);
      const Inputs in = make_inputs(p, ++seed);
      const Reference want = run_ref(p, in);
      for (pf_emu::Schedule schedule : {pf_emu::Schedule::Lockstep, pf_emu::Schedule::WarpByWarp})
        for (int stages : {2, 1})
          expect_close(run_emulated_mma(p, in, TileMath::Tf32, schedule, stages), want, 3e-3,
                       describe(p) + " stages=" + std::to_string(stages) +
                           (schedule == pf_emu::Schedule::Lockstep ? " lockstep" : " warp by warp"));
    }
}

// A local window narrower than the sequence over whole tiles: n = 256 (every
// tile full), two heads without pieces, windows of 100 and 150 keys, causal
// and bidirectional, TF32 and bf16. Only such windows give the tensor-core
// kernels warp tiles inside both the window and the causal mask, which skip
// the per-element mask (SoftmaxMask::all_visible); the model's causal
// window runs them on every interior tile.
TEST(SoftmaxCudaEmulated, TensorCoreWindowInsideTheMask) {
  uint64_t seed = 2300;
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16})
    for (int64_t window : {100, 150})
      for (bool causal : {true, false}) {
        const SoftmaxAttentionParams p = softmax_attention_params(2, 256, 64, causal, window);
        const Inputs in = make_inputs(p, ++seed);
        const Reference want = run_ref(p, in);
        const double tol = math == TileMath::Bf16 ? 2.5e-2 : 3e-3;
        for (pf_emu::Schedule schedule : {pf_emu::Schedule::Lockstep, pf_emu::Schedule::WarpByWarp})
          expect_close(run_emulated_mma(p, in, math, schedule, 2), want, tol,
                       describe(p) + " math=" + tile_math_name(math) +
                           (schedule == pf_emu::Schedule::Lockstep ? " lockstep" : " warp by warp"));
      }
}

// bf16 storage on the bf16 tensor-core kernels (a bf16 model's attention):
// its rows go into the bf16 tiles by cp.async where they are exactly 64 or
// 128 columns (d = 64, 128), by loads otherwise (d = 16, 72); and on the
// fp32 kernels (a bf16 model on a GPU without bf16 tensor cores), which
// widen each element as they load it. On inputs that bf16 holds exactly,
// each must give the bits of the fp32-storage run with every output rounded
// once to bf16 (lse, fp32 in both, the same), the backward of that run
// reading the rounded O as the bf16 one does; and both near the float64
// reference (n > 1). Double buffered in lockstep and single buffered one
// warp at a time; sequences of 1 row, a short tile and three tiles with a
// short last one.
TEST(SoftmaxCudaEmulated, Bf16StorageIsTheFp32RunRounded) {
  uint64_t seed = 2500;
  for (TileMath math : {TileMath::Bf16, TileMath::Fp32})
  for (int64_t d : {16, 64, 72, 128})
    for (int64_t n : {1, 40, 150})
      for (bool causal : {false, true}) {
        SoftmaxAttentionParams p = softmax_attention_params(1, n, d, causal, causal ? 0 : 70);
        p.tile_math = math;
        Inputs in = make_inputs(p, ++seed);
        for (std::vector<double>* x : {&in.Q, &in.K, &in.V, &in.dO}) {
          const std::vector<float> r = rounded_bf16(cast_vector<float>(*x));
          x->assign(r.begin(), r.end());
        }
        const Reference want = run_ref(p, in);
        for (int stages : {2, 1}) {
          const pf_emu::Schedule schedule = stages == 2 ? pf_emu::Schedule::Lockstep : pf_emu::Schedule::WarpByWarp;
          const std::string what = describe(p) + " " + tile_math_name(math) + " stages=" + std::to_string(stages);
          const Outputs f32 = run_emulated<float>(p, in, schedule, stages, /*round_o=*/true);
          const Outputs b16 = run_emulated<__nv_bfloat16>(p, in, schedule, stages);
          EXPECT_EQ(b16.O, rounded_bf16(f32.O)) << what << " O";
          EXPECT_EQ(b16.lse, f32.lse) << what << " lse";
          EXPECT_EQ(b16.dQ, rounded_bf16(f32.dQ)) << what << " dQ";
          EXPECT_EQ(b16.dK, rounded_bf16(f32.dK)) << what << " dK";
          EXPECT_EQ(b16.dV, rounded_bf16(f32.dV)) << what << " dV";
          // (One row's lse is one rounded score: too few elements for a relative norm.)
          if (n > 1) expect_close(b16, want, 2.5e-2, what + " bf16 storage");
        }
      }
}

// Pieces (SoftmaxAttentionParams::pieces, runtime/row_spans.h): one launch
// sequence over rows cut into pieces of 70, 1, 0, 140 and 33 rows with gaps
// between them, each piece's queries seeing only its own keys, against the
// float64 reference piece by piece (the fp32 kernels 1e-5, TF32 3e-3, bf16
// 2.5e-2); the rows of the gaps stay as they were (NaN), so no kernel reads
// or writes outside the pieces' rows. d = 16, and 64 (the tensor-core kernels then
// stream the pieces' fp32 rows by cp.async). Windows 0 and 40, causal and
// bidirectional; the tensor-core kernels double buffered in lockstep and
// single buffered one warp at a time.
TEST(SoftmaxCudaEmulated, PiecesMatchFloat64Reference) {
  const int64_t total = 300;
  const std::vector<RowSpan> spans = {{0, 70, 0}, {75, 1, 0}, {80, 0, 0}, {90, 140, 0}, {240, 33, 0}};
  MemoryTracker tracker(Device::cpu());
  const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
  const RowSpans pieces(res.ctx(), spans);
  uint64_t seed = 2100;
  for (int64_t d : {16, 64})  // 64: the fp32 rows of each piece streamed by cp.async from the piece's start
  for (TileMath math : {TileMath::Fp32, TileMath::Tf32, TileMath::Bf16})
    for (int64_t window : {0, 40})
      for (bool causal : {false, true}) {
        const SoftmaxAttentionParams whole = softmax_attention_params(1, total, d, causal, window);
        const Inputs in = make_inputs(whole, ++seed);
        for (int stages : {2, 1}) {
          if (math == TileMath::Fp32 && stages == 1) continue;  // the fp32 kernels stream no buffers
          SoftmaxAttentionParams p = softmax_pieces_params(whole, pieces);
          p.tile_math = math;
          const pf_emu::Schedule schedule = stages == 2 ? pf_emu::Schedule::Lockstep : pf_emu::Schedule::WarpByWarp;
          const Outputs got = run_emulated(p, in, schedule, stages);
          const std::string what =
              describe(whole) + " math=" + tile_math_name(math) + " stages=" + std::to_string(stages);
          // The pieces' rows against each piece's own reference (all pieces'
          // rows in one comparison: a piece of one row alone has a single lse,
          // too few elements for a relative norm); the gaps untouched.
          std::vector<bool> inside(static_cast<size_t>(total), false);
          Outputs got_rows;
          Reference want_rows;
          for (const RowSpan& x : spans) {
            if (x.len == 0) continue;
            const SoftmaxAttentionParams one = softmax_attention_params(1, x.len, d, causal, window);
            append(got_rows, rows_of(got, x.row0, x.len, d));
            append(want_rows, run_ref(one, rows_of(in, x.row0, x.len, d)));
            for (int64_t r = x.row0; r < x.row0 + x.len; ++r) inside[static_cast<size_t>(r)] = true;
          }
          expect_close(got_rows, want_rows,
                       math == TileMath::Bf16   ? 2.5e-2
                       : math == TileMath::Tf32 ? 3e-3
                                                : 1e-5,
                       what);
          for (int64_t r = 0; r < total; ++r) {
            if (inside[static_cast<size_t>(r)]) continue;
            EXPECT_TRUE(std::isnan(got.lse[static_cast<size_t>(r)])) << what << " lse of gap row " << r;
            for (int64_t c = 0; c < d; ++c)
              for (const std::vector<float>* o : {&got.O, &got.dQ, &got.dK, &got.dV})
                EXPECT_TRUE(std::isnan((*o)[static_cast<size_t>(r * d + c)])) << what << " gap row " << r;
          }
        }
      }
}

// A window that covers every key is no window: the same bits as window 0.
TEST(SoftmaxCudaEmulated, WindowOfTheWholeSequenceIsNoWindow) {
  for (bool causal : {false, true}) {
    SoftmaxAttentionParams p = softmax_attention_params(2, 45, 8, causal);
    const Inputs in = make_inputs(p, 800 + causal);
    const Outputs none = run_emulated(p, in);
    for (int64_t w : {45, 46, 1000}) {
      p.window = w;
      const Outputs got = run_emulated(p, in);
      EXPECT_EQ(got.O, none.O) << "window " << w;
      EXPECT_EQ(got.lse, none.lse) << "window " << w;
      EXPECT_EQ(got.dQ, none.dQ) << "window " << w;
      EXPECT_EQ(got.dK, none.dK) << "window " << w;
      EXPECT_EQ(got.dV, none.dV) << "window " << w;
    }
    p.window = 0;
    const Outputs mma_none = run_emulated_mma(p, in, TileMath::Tf32);
    for (int64_t w : {45, 1000}) {
      p.window = w;
      const Outputs got = run_emulated_mma(p, in, TileMath::Tf32);
      EXPECT_EQ(got.O, mma_none.O) << "tensor cores, window " << w;
      EXPECT_EQ(got.dQ, mma_none.dQ) << "tensor cores, window " << w;
      EXPECT_EQ(got.dK, mma_none.dK) << "tensor cores, window " << w;
    }
  }
}

// One query per head (the recurrent window): key counts below, at and above
// a tile of kThreads keys, head sizes that do not fill the threads, gaps
// between the heads' key blocks; the output starts as NaN.
TEST(SoftmaxCudaEmulated, DecodeMatchesFloat64ReferenceAndTheCpu) {
  uint64_t seed = 900;
  for (int64_t n : {1, 5, 128, 129, 300})
    for (int64_t d : {3, 16, 33, 64, 128}) {  // 128: a column per thread of the block
      const DecodeCase c = make_case(3, n, d, 5, ++seed);
      const SoftmaxAttentionParams& p = c.p;
      const int64_t stride = c.stride;
      const auto q = cast_vector<float>(c.q), K = cast_vector<float>(c.K), V = cast_vector<float>(c.V);
      std::vector<float> got(q.size(), NAN), cpu(q.size());
      std::vector<double> want(q.size());
      EmulatedLaunch launch;
      softmax_cuda::decode(launch, p, softmax_attention_scale(p), stride, q.data(), K.data(), V.data(), got.data());
      EXPECT_EQ(launch.launches, 1);
      softmax_attention_decode_ref(p, stride, c.q.data(), c.K.data(), c.V.data(), want.data());
      ExecContext ctx;
      softmax_attention_decode(ctx, p, stride, q.data(), K.data(), V.data(), cpu.data());
      EXPECT_LE(rel_l2(got, want), 1e-6) << "n=" << n << " d=" << d;
      EXPECT_LE(rel_l2(got, cpu), 1e-6) << "n=" << n << " d=" << d;
    }
}

TEST(SoftmaxCudaEmulated, EmptyCallsLaunchNothing) {
  const SoftmaxAttentionParams p = softmax_attention_params(0, 10, 4, false);
  const Outputs out = run_emulated(p, make_inputs(p, 1));
  EXPECT_TRUE(out.O.empty());
}

// The tensor-core kernels' shared memory (mma_plan picks the buffers from
// it): the bytes at both padded head sizes, and the most buffers of the
// streamed tiles (2, 1 or 0) within the opt-in limits of sm_80 (163 KiB),
// sm_86 (99 KiB), sm_90 (227 KiB) and a 48 KiB default.
TEST(SoftmaxCudaEmulated, SharedMemoryStagesFitEachLimit) {
  using softmax_cuda::backward_mma_smem_bytes;
  using softmax_cuda::forward_mma_smem_bytes;
  using softmax_cuda::mma_stages;
  // 64-row tiles of DP + 4 floats or DP + 8 bf16: (1 + 2 stages) tiles
  // forward, (2 + 2 stages) backward.
  EXPECT_EQ(forward_mma_smem_bytes(TileMath::Tf32, 64, 2), 87040);    // 85 KiB
  EXPECT_EQ(backward_mma_smem_bytes(TileMath::Tf32, 64, 2), 104448);  // 102 KiB
  EXPECT_EQ(forward_mma_smem_bytes(TileMath::Tf32, 128, 2), 168960);  // 165 KiB
  EXPECT_EQ(backward_mma_smem_bytes(TileMath::Tf32, 128, 1), 135168);
  EXPECT_EQ(forward_mma_smem_bytes(TileMath::Bf16, 64, 2), 46080);
  EXPECT_EQ(backward_mma_smem_bytes(TileMath::Bf16, 128, 2), 104448);
  const int64_t k48 = 48 * 1024, sm86 = 99 * 1024, sm80 = 163 * 1024, sm90 = 227 * 1024;
  struct Case {
    TileMath math;
    int64_t limit;
    int forward_d64, backward_d64, forward_d128, backward_d128;
  };
  for (const Case& c : {Case{TileMath::Tf32, sm90, 2, 2, 2, 2}, Case{TileMath::Tf32, sm80, 2, 2, 1, 1},
                        Case{TileMath::Tf32, sm86, 2, 1, 1, 0}, Case{TileMath::Tf32, k48, 0, 0, 0, 0},
                        Case{TileMath::Bf16, sm90, 2, 2, 2, 2}, Case{TileMath::Bf16, sm80, 2, 2, 2, 2},
                        Case{TileMath::Bf16, sm86, 2, 2, 2, 1}, Case{TileMath::Bf16, k48, 2, 1, 0, 0}}) {
    SCOPED_TRACE(std::string(tile_math_name(c.math)) + " limit " + std::to_string(c.limit));
    for (int d : {1, 33, 64}) {  // padded to 64
      EXPECT_EQ(mma_stages(c.math, d, c.limit).forward, c.forward_d64) << "d = " << d;
      EXPECT_EQ(mma_stages(c.math, d, c.limit).backward, c.backward_d64) << "d = " << d;
    }
    for (int d : {65, 100, 128}) {  // padded to 128
      EXPECT_EQ(mma_stages(c.math, d, c.limit).forward, c.forward_d128) << "d = " << d;
      EXPECT_EQ(mma_stages(c.math, d, c.limit).backward, c.backward_d128) << "d = " << d;
    }
    // What is picked fits the limit.
    for (int d : {64, 128}) {
      const auto st = mma_stages(c.math, d, c.limit);
      if (st.forward > 0) {
        EXPECT_LE(forward_mma_smem_bytes(c.math, d, st.forward), c.limit);
      }
      if (st.backward > 0) {
        EXPECT_LE(backward_mma_smem_bytes(c.math, d, st.backward), c.limit);
      }
    }
  }
}

}  // namespace
}  // namespace pf
