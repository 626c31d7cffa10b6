// The fused CUDA FAVOR+ kernels (kernels/favor_attention/favor_attention_cuda_fused.cuh)
// run on the CPU under the block emulator (tests/support/cuda_block_emulator.h):
// the same kernel code and launch order the GPU runs, on 256 cooperative
// fibers per block, through the sequence-parallel protocol over P = 1, 2, 3
// uneven blocks, against the float64 whole-sequence reference. Covers both
// tile heights (16, 32), segments of one tile and of several with a short
// last one, padding of every dimension (d = 5, m = 7 and d = 16, m = 32),
// causal and bidirectional, FAVOR+ and relu; and every call's temporaries
// within the bytes the planner is told (fused_workspace_bytes); the state a
// block carries from tile to tile in global and in shared memory
// (Dims::smem_state). The tensor-core paths run too (mma.sync with TF32 and
// bf16 operands, lane by lane by the PTX fragment layouts) against the
// reference to each precision's tolerance, with the warps in lockstep and one
// warp at a time. The exp kernel's trained per-head projections and their
// gradient dW go through the same protocol, with and without the key's
// |k|^2/2 term. The plan of a call's sizes per device: test_favor_cuda_plan.cc.
#include "tests/support/cuda_block_emulator.h"
// The emulator must come first: it defines the CUDA keywords the kernels use.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/favor_attention/favor_attention_cuda_launch.cuh"
#include "kernels/random_features/random_features.h"
#include "runtime/exec.h"
#include "runtime/memory.h"
#include "tests/kernels/favor_pieces_driver.h"
#include "tests/kernels/favor_protocol_driver.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

using namespace favor_cuda;

// The launch policy of favor_attention_cuda_launch.cuh on the emulator; host
// buffers start as NaN, so a read of one the kernels did not write shows, and
// lie between guard zones (pf_emu::Scratch), so a write past one aborts.
// The call's arguments run from guarded copies too (in, out), so that a read
// past a caller's buffer gives NaN results even where the kernel then masks
// the value it read (0 x NaN is NaN), and a write past it aborts.
class EmulatedLaunch {
 public:
  explicit EmulatedLaunch(pf_emu::Schedule schedule) : schedule_(schedule) {}
  float* buffer(int64_t floats) { return scratch_.buffer(floats); }
  int64_t bytes() const { return scratch_.bytes(); }
  // A guarded copy of the input p[0, floats) (nullptr stays nullptr).
  const float* in(const float* p, int64_t floats) { return p ? copy_of(p, floats) : nullptr; }
  // A guarded copy of the output (or input and output) p[0, floats), which
  // copy_back() writes to p.
  float* out(float* p, int64_t floats) {
    if (!p) return nullptr;
    outs_.push_back(Out{p, copy_of(p, floats), floats});
    return outs_.back().from;
  }
  void copy_back() {
    for (const Out& o : outs_) std::memcpy(o.to, o.from, sizeof(float) * o.floats);
  }
  void tiles(void (*kernel)(Args), unsigned gx, unsigned gy, unsigned gz, int64_t smem, const Args& args) {
    if (gx == 0 || gy == 0 || gz == 0) return;
    pf_emu::launch(
        {gx, gy, gz}, {static_cast<unsigned>(kThreads), 1, 1}, static_cast<size_t>(smem), [&] { kernel(args); },
        schedule_);
  }
  template <typename... P, typename... A>
  void grid(void (*kernel)(P...), unsigned gx, unsigned gy, A... args) {
    if (gx == 0 || gy == 0) return;
    pf_emu::launch(
        {gx, gy, 1}, {static_cast<unsigned>(kThreads), 1, 1}, 0, [&] { kernel(args...); }, schedule_);
  }
  void copy(float* dst, const float* src, int64_t floats) { std::memcpy(dst, src, sizeof(float) * floats); }

 private:
  struct Out {
    float* to;
    float* from;
    int64_t floats;
  };
  float* copy_of(const float* p, int64_t floats) {
    float* copy = args_.buffer(floats);
    std::memcpy(copy, p, sizeof(float) * floats);
    return copy;
  }
  pf_emu::Scratch scratch_;
  pf_emu::Scratch args_;  // the guarded copies of the call's arguments
  std::vector<Out> outs_;
  pf_emu::Schedule schedule_;
};

// The floats of a protocol call's arguments (favor_attention.h): rows of d
// (q, k, v, o, d_o, dq, dk, dv) and of d + 1 (y), one per row (row scales,
// den), the projections, one state per call head, the dW slots.
struct ArgFloats {
  int64_t x, y, rows, w, states, dw;
  explicit ArgFloats(const FavorShape& s)
      : x(heads_of(s).extent * s.d),
        y(heads_of(s).extent * (s.d + 1)),
        rows(heads_of(s).extent),
        w(s.w_heads * s.m * s.d),
        states(s.heads * s.state_size()),
        dw(heads_of(s).slots * s.m * s.d) {}
};

// The protocol's eight steps on the emulated kernels, queued on ctx.stream
// like every CPU op. seg_len > 0 replaces the segment length the sizes pick.
struct EmulatedCudaOps {
  int ct = 32;
  int seg_len = 0;
  TileMath math = TileMath::Fp32;
  pf_emu::Schedule schedule = pf_emu::Schedule::Lockstep;
  bool smem_state = false;  // Dims::smem_state: the carried state in shared memory
  bool smem_projection = true;  // FavorShape::projection_in_shared
  bool resident = true;         // FavorShape::state_in_registers
  int64_t slice = 0;        // FavorShape::feature_slice: 0, the sizes' own choice
  // Each call's temporaries, checked against what the planner is told
  // (fused_workspace_bytes) when the sizes pick the segments themselves.
  FavorShape sliced(FavorShape s) const {
    s.feature_slice = slice;
    s.projection_in_shared = smem_projection;
    s.state_in_registers = resident;
    return s;
  }
  Dims dims(const FavorShape& shape) const {
    const FavorShape s = sliced(shape);
    Dims D = dims_for(s, ct, math, smem_state);
    if (seg_len > 0) {
      D.seg_len = seg_len;
      D.segs = static_cast<int>(ceil_div(std::max<int64_t>(s.n, 1), seg_len));
    }
    return D;
  }
  template <typename F>
  void run(const ExecContext& ctx, const FavorShape& s, F f) const {
    const int64_t planned = seg_len > 0 ? -1 : fused_workspace_bytes(sliced(s));
    host_launch(ctx, [f, planned, schedule = schedule] {
      EmulatedLaunch launch(schedule);
      f(launch);
      launch.copy_back();
      if (planned >= 0) {
        EXPECT_LE(launch.bytes(), planned) << "temporaries beyond fused_workspace_bytes";
      }
    });
  }
  void causal_forward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k, const float* v,
                            const float* W, float* y, float* rs, float* total) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_causal_forward_local(L, D, heads_of(s), L.in(q, z.x), L.in(k, z.x), L.in(v, z.x), L.in(W, z.w),
                                 L.out(y, z.y), L.out(rs, z.rows), L.out(total, z.states));
    });
  }
  void add_prefix(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W, const float* prefix,
                  float* y, float* rs) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_add_prefix(L, D, heads_of(s), L.in(q, z.x), L.in(W, z.w), L.in(prefix, z.states), L.out(y, z.y),
                       L.out(rs, z.rows), true);
    });
  }
  void key_state(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                 float* total) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_key_state(L, D, heads_of(s), L.in(k, z.x), L.in(v, z.x), L.in(W, z.w), L.out(total, z.states));
    });
  }
  void bidirectional_forward_finish(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                    const float* total, float* y, float* rs) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_add_prefix(L, D, heads_of(s), L.in(q, z.x), L.in(W, z.w), L.in(total, z.states), L.out(y, z.y),
                       L.out(rs, z.rows), false);
    });
  }
  void causal_backward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* k,
                             const float* v, const float* W, const float* o, const float* den, const float* rs,
                             const float* d_o, const float* prefix, float* dq, float* dk, float* dv, float* total,
                             float* dW) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_causal_backward_local(L, D, heads_of(s), L.in(q, z.x), L.in(k, z.x), L.in(v, z.x), L.in(W, z.w),
                                  L.in(o, z.x), L.in(den, z.rows), L.in(rs, z.rows), L.in(d_o, z.x),
                                  L.in(prefix, z.states), L.out(dq, z.x), L.out(dk, z.x), L.out(dv, z.x),
                                  L.out(total, z.states), L.out(dW, z.dw));
    });
  }
  void backward_add_suffix(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v, const float* W,
                           const float* suffix, float* dk, float* dv, float* dW) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_key_grad_from_state(L, D, heads_of(s), L.in(k, z.x), L.in(v, z.x), L.in(W, z.w), L.in(suffix, z.states),
                                L.out(dk, z.x), L.out(dv, z.x), true, L.out(dW, z.dw));
    });
  }
  void bidirectional_backward_local(const ExecContext& ctx, const FavorShape& s, const float* q, const float* W,
                                    const float* o, const float* den, const float* rs, const float* d_o,
                                    const float* total, float* dq, float* grad_total, float* dW) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_bidirectional_backward_local(L, D, heads_of(s), L.in(q, z.x), L.in(W, z.w), L.in(o, z.x), L.in(den, z.rows),
                                         L.in(rs, z.rows), L.in(d_o, z.x), L.in(total, z.states), L.out(dq, z.x),
                                         L.out(grad_total, z.states), L.out(dW, z.dw));
    });
  }
  void bidirectional_backward_finish(const ExecContext& ctx, const FavorShape& s, const float* k, const float* v,
                                     const float* W, const float* grad_total, float* dk, float* dv, float* dW) const {
    const Dims D = dims(s);
    run(ctx, s, [=](EmulatedLaunch& L) {
      const ArgFloats z(s);
      fused_key_grad_from_state(L, D, heads_of(s), L.in(k, z.x), L.in(v, z.x), L.in(W, z.w), L.in(grad_total, z.states),
                                L.out(dk, z.x), L.out(dv, z.x), false, L.out(dW, z.dw));
    });
  }
};

struct Case {
  int64_t n, d, m;
  int ct, seg_len;
};

// One draw of inputs (B = 1, H = 2) and the float64 reference's outputs and
// gradients, for the fixed-projection kernels.
struct ReferenceCase {
  FavorAttentionParams p;
  std::vector<float> q, k, v, g, W;
  std::vector<double> o, dq, dk, dv;
  // scale multiplies q and k: wider spreads of the features' exponents;
  // with ramp, row i of n by scale * (1 + ramp * i / (n - 1)): exponents
  // that grow along the sequence, so the running log-scale keeps moving.
  ReferenceCase(const Case& c, bool causal, FeatureKernel kernel, uint64_t seed, double scale = 1, double ramp = 0) {
    const int64_t H = 2, size = H * c.n * c.d;
    q = test::cast_vector<float>(test::normal_vector(size, seed, 1));
    k = test::cast_vector<float>(test::normal_vector(size, seed, 2));
    for (size_t e = 0; e < q.size(); ++e) {
      const int64_t row = static_cast<int64_t>(e) / c.d % c.n;
      const double f =
          scale * (1 + ramp * static_cast<double>(row) / static_cast<double>(std::max<int64_t>(c.n - 1, 1)));
      q[e] = static_cast<float>(q[e] * f);
      k[e] = static_cast<float>(k[e] * f);
    }
    v = test::cast_vector<float>(test::normal_vector(size, seed, 3));
    g = test::cast_vector<float>(test::normal_vector(size, seed, 4));
    W = random_projection_f32({c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 0, 0});
    const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end()),
        gd(g.begin(), g.end()), Wd(W.begin(), W.end());
    p = favor_attention_params(1, H, c.n, c.d, c.m, causal, kernel);
    o.resize(size), dq.resize(size), dk.resize(size), dv.resize(size);
    favor_attention_forward_ref(p, qd.data(), kd.data(), vd.data(), Wd.data(), o.data());
    favor_attention_backward_ref(p, qd.data(), kd.data(), vd.data(), Wd.data(), gd.data(), dq.data(), dk.data(),
                                 dv.data());
  }
  size_t size() const { return q.size(); }
};

// The float64 reference's projection gradient dW [B*H, m, d] of a case.
std::vector<double> reference_weight_grad(const ReferenceCase& r) {
  const FavorShape& s = r.p.shape;
  const std::vector<double> qd(r.q.begin(), r.q.end()), kd(r.k.begin(), r.k.end()), vd(r.v.begin(), r.v.end()),
      gd(r.g.begin(), r.g.end()), Wd(r.W.begin(), r.W.end());
  std::vector<double> rq(r.size()), rk(r.size()), rv(r.size()), rW(s.heads * s.m * s.d, 0.0);
  favor_attention_backward_ref(r.p, qd.data(), kd.data(), vd.data(), Wd.data(), gd.data(), rq.data(), rk.data(),
                               rv.data(), rW.data());
  return rW;
}

// The emulated kernels' o, dq, dk, dv through the protocol over P blocks.
struct EmulatedRun {
  std::vector<float> o, dq, dk, dv;
  EmulatedRun(const ReferenceCase& r, const EmulatedCudaOps& ops, bool causal, int P)
      : o(r.size()), dq(r.size()), dk(r.size()), dv(r.size()) {
    MemoryTracker tracker(Device::cpu());
    const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
    test::run_favor_protocol(ops, res.ctx(), r.p.shape, causal, P, r.q.data(), r.k.data(), r.v.data(), r.W.data(),
                             r.g.data(), o.data(), dq.data(), dk.data(), dv.data());
  }
};

// f(case, causal, kernel, seed) for every case, direction and fixed-projection kernel.
template <typename F>
void each_case(std::initializer_list<Case> cases, uint64_t seed, F f) {
  for (const Case& c : cases)
    for (bool causal : {true, false})
      for (FeatureKernel kernel : {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Elu})
        f(c, causal, kernel, ++seed);
}

std::string where(const Case& c, bool causal, FeatureKernel kernel, int P) {
  return "n=" + std::to_string(c.n) + " d=" + std::to_string(c.d) + " m=" + std::to_string(c.m) +
         " ct=" + std::to_string(c.ct) + " seg_len=" + std::to_string(c.seg_len) + " causal=" + std::to_string(causal) +
         " kernel=" + feature_kernel_name(kernel) + " P=" + std::to_string(P);
}

TEST(FavorCudaEmulated, ProtocolMatchesWholeSequenceReference) {
  // seg_len 0: the sizes' own choice (one-tile segments at these n); 80: several tiles and a short last one.
  each_case({Case{7, 5, 7, 16, 0}, Case{150, 16, 32, 32, 0}, Case{150, 16, 32, 16, 80}, Case{150, 5, 7, 32, 80}}, 4100,
            [](const Case& c, bool causal, FeatureKernel kernel, uint64_t seed) {
              const ReferenceCase r(c, causal, kernel, seed);
              for (int P : {1, 2, 3}) {
                SCOPED_TRACE(where(c, causal, kernel, P));
                EmulatedCudaOps ops{c.ct, c.seg_len};
                ops.smem_state = P != 2;  // the carried state in shared memory (P = 1, 3) and in global memory
                const EmulatedRun e(r, ops, causal, P);
                EXPECT_LE(test::rel_l2(e.o, r.o), 1e-5);
                EXPECT_LE(test::rel_l2(e.dq, r.dq), 1e-5);
                EXPECT_LE(test::rel_l2(e.dk, r.dk), 1e-5);
                EXPECT_LE(test::rel_l2(e.dv, r.dv), 1e-5);
              }
            });
}

// The tensor-core paths of the tile kernels (block_mm's mma.sync with TF32
// and with bf16 operands, lane by lane on the emulator by the PTX fragment
// layouts; the kernels a GPU runs where the resident ones do not take the
// call, d + 1 above 128 or slices wider than 256, so FavorShape::
// state_in_registers is off here) through the protocol: within each
// precision's tolerance of the reference and not equal to the fp32 path's
// results, so the tensor-core path did run.
// TF32: 1e-2, as on the GPU (relu's dq and dk 0.1, for the masks TF32 flips:
// test_favor_attention_gpu.cc). bf16 keeps 8 significant bits to TF32's 11:
// 4e-2 (relu's dq and dk 0.3). A lane holding another element than its
// layout says, or a product read before a barrier, gives O(1) errors.
void expect_tensor_cores_near_reference(const EmulatedRun& e, const ReferenceCase& r, TileMath math,
                                        FeatureKernel kernel) {
  const bool bf16 = math == TileMath::Bf16;
  const double tol = bf16 ? 4e-2 : 1e-2;
  const double qk_tol = kernel == FeatureKernel::Relu ? (bf16 ? 0.3 : 0.1) : tol;
  EXPECT_LE(test::rel_l2(e.o, r.o), tol);
  EXPECT_LE(test::rel_l2(e.dq, r.dq), qk_tol);
  EXPECT_LE(test::rel_l2(e.dk, r.dk), qk_tol);
  EXPECT_LE(test::rel_l2(e.dv, r.dv), tol);
}

TEST(FavorCudaEmulated, TensorCoreTilesMatchReference) {
  // Each mma is two warp barriers here: small sizes (one segment of two
  // 32-row tiles; two segments of 16-row tiles, the second short).
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
    const bool bf16 = math == TileMath::Bf16;
    each_case({Case{64, 16, 32, 32, 0}, Case{56, 5, 7, 16, 32}}, bf16 ? 4350 : 4300,
              [&](const Case& c, bool causal, FeatureKernel kernel, uint64_t seed) {
                const ReferenceCase r(c, causal, kernel, seed);
                for (int P : {1, 2}) {
                  SCOPED_TRACE(where(c, causal, kernel, P) + " math=" + tile_math_name(math));
                  EmulatedCudaOps tensor{c.ct, c.seg_len};
                  tensor.math = math;
                  tensor.resident = false;
                  ASSERT_FALSE(tensor.dims(r.p.shape).resident);
                  // Two blocks with one warp at a time running ahead (a missing barrier between one warp's
                  // reads and another's overwrite shows there), one with all warps in lockstep.
                  if (P == 2) tensor.schedule = pf_emu::Schedule::WarpByWarp;
                  tensor.smem_state = P == 2;
                  const EmulatedRun tc(r, tensor, causal, P);
                  const EmulatedRun fp32(r, EmulatedCudaOps{c.ct, c.seg_len}, causal, P);
                  expect_tensor_cores_near_reference(tc, r, math, kernel);
                  EXPECT_GT(test::rel_l2(tc.o, fp32.o), 1e-6)
                      << "the tensor-core path gave the fp32 path's output: did it run?";
                }
              });
  }
}

// The resident kernels' o, dq, dk, dv against the float64 reference.
// Observed: TF32 o, dv <= 1.2e-3 and dq, dk <= 3.1e-3; bf16 o, dv <= 9.5e-3
// and dq, dk <= 2.3e-2. Relu's dq and dk jump where a feature crosses its
// threshold (TensorCoreTilesMatchReference): bf16 1.1e-1.
void expect_resident_near_reference(const std::vector<float>& o, const std::vector<float>& dq,
                                    const std::vector<float>& dk, const std::vector<float>& dv, const ReferenceCase& r,
                                    TileMath math, FeatureKernel kernel) {
  const bool bf16 = math == TileMath::Bf16;
  const double tol = bf16 ? 3e-2 : 3e-3;
  const double qk_tol = kernel == FeatureKernel::Relu ? (bf16 ? 0.3 : 0.1) : (bf16 ? 8e-2 : 8e-3);
  EXPECT_LE(test::rel_l2(o, r.o), tol);
  EXPECT_LE(test::rel_l2(dq, r.dq), qk_tol);
  EXPECT_LE(test::rel_l2(dk, r.dk), qk_tol);
  EXPECT_LE(test::rel_l2(dv, r.dv), tol);
}
void expect_resident_near_reference(const EmulatedRun& e, const ReferenceCase& r, TileMath math, FeatureKernel kernel) {
  expect_resident_near_reference(e.o, e.dq, e.dk, e.dv, r, math, kernel);
}

// The kernels that keep each warp's strip of the state in registers
// (favor_attention_cuda_resident.cuh: the segments' key states, the causal
// backward's query-gradient states, the causal forward, and the prefix and
// total steps, which the causal cases over 3 blocks and every
// bidirectional case run; the launch
// sequences take them whenever the tile math is TF32 or bf16 and the slice
// fits): 1, 2, 3 and 5 value strips (d = 5, 16, 33, 64) of 8, 16 and 32
// feature tiles with some in use (m = 40, 72, 200 padded to 48, 80, 208),
// the backward's feature strips of 8 and 16 value tiles (d + 1 padded to
// 16, 32, 48 and 80), one and two of them per warp (m = 200), segments
// of several tiles with a short last one, q and k at 2.5 times the unit
// scale (the tiles' largest exponents then move the state's log-scale),
// d = 100 (d + 1 padded to 112: 7 value strips, and 14 value tiles of the
// backward's feature strips, of the 16 its kernel holds),
// causal and bidirectional, through the protocol over 1 and 3 blocks (the
// second one warp at a time), against the float64 reference.
TEST(FavorCudaEmulated, ResidentStateMatchesReference) {
  struct ResidentCase {
    Case c;
    FeatureKernel kernel;
    double scale;
  };
  const ResidentCase cases[] = {{Case{200, 33, 40, 32, 64}, FeatureKernel::Softmax, 2.5},
                                {Case{70, 16, 72, 16, 32}, FeatureKernel::Elu, 1.0},
                                {Case{40, 5, 200, 32, 0}, FeatureKernel::Softmax, 1.0},
                                {Case{9, 5, 7, 16, 0}, FeatureKernel::Relu, 1.0},
                                {Case{40, 64, 24, 16, 0}, FeatureKernel::Softmax, 2.5},
                                {Case{40, 100, 24, 16, 0}, FeatureKernel::Softmax, 1.0}};
  uint64_t seed = 4700;
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
    for (const ResidentCase& x : cases) {
      for (bool causal : {true, false}) {
        const ReferenceCase r(x.c, causal, x.kernel, ++seed, x.scale);
        for (int P : {1, 3}) {
          SCOPED_TRACE(where(x.c, causal, x.kernel, P) + " math=" + tile_math_name(math));
          EmulatedCudaOps ops{x.c.ct, x.c.seg_len};
          ops.math = math;
          if (P == 3) ops.schedule = pf_emu::Schedule::WarpByWarp;
          ASSERT_TRUE(ops.dims(r.p.shape).resident);
          expect_resident_near_reference(EmulatedRun(r, ops, causal, P), r, math, x.kernel);
        }
      }
    }
  }
}

// The projection gradient dW through the resident kernels that make it
// (the causal backward's two sweeps, the second from its staged keys, and
// the bidirectional backward's query segments; the suffix step adds its
// part from the tile kernel), TF32 and bf16, with the projection
// in shared memory and in global memory, causal and bidirectional, over 1
// and 3 blocks (the second one warp at a time), every fixed-projection
// kernel, against the float64 reference's dW. Observed: TF32 <= 9.4e-4,
// bf16 <= 8.7e-3 (relu's dW 2.2e-2 and 6.4e-2: its features jump at the
// threshold); o, dq, dk and dv within the resident test's tolerances.
// The emulated run of ops over P blocks with dW against the reference r on
// the resident kernels: dW within the test's tolerance, o, dq, dk, dv within
// the resident tests'.
void expect_resident_grads(const ReferenceCase& r, const EmulatedCudaOps& ops, bool causal, FeatureKernel kernel,
                           int P) {
  const std::vector<double> rW = reference_weight_grad(r);
  MemoryTracker tracker(Device::cpu());
  const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
  std::vector<float> o(r.size()), dq(r.size()), dk(r.size()), dv(r.size()), dW(rW.size(), 0.f);
  ASSERT_TRUE(ops.dims(r.p.shape).resident);
  test::run_favor_protocol(ops, res.ctx(), r.p.shape, causal, P, r.q.data(), r.k.data(), r.v.data(), r.W.data(),
                           r.g.data(), o.data(), dq.data(), dk.data(), dv.data(), dW.data());
  const bool bf16 = ops.math == TileMath::Bf16;
  const double tol = kernel == FeatureKernel::Relu ? (bf16 ? 0.2 : 0.06) : (bf16 ? 2.5e-2 : 3e-3);
  EXPECT_LE(test::rel_l2(dW, rW), tol);
  expect_resident_near_reference(o, dq, dk, dv, r, ops.math, kernel);
}

TEST(FavorCudaEmulated, ResidentProjectionGradMatchesReference) {
  // Tiles of 16 in segments of 32: a tile's q, whose feature backward makes dW, while the next one's is staged.
  each_case({Case{70, 16, 40, 16, 32}}, 4650, [](const Case& c, bool causal, FeatureKernel kernel, uint64_t seed) {
    const ReferenceCase r(c, causal, kernel, seed);
    for (TileMath math : {TileMath::Tf32, TileMath::Bf16})
      for (bool smem : {true, false})
        for (int P : {1, 3}) {
          SCOPED_TRACE(where(c, causal, kernel, P) + " math=" + tile_math_name(math) +
                       " smem_state=" + std::to_string(smem));
          EmulatedCudaOps ops{c.ct, c.seg_len};
          ops.math = math;
          ops.smem_state = smem;
          if (P == 3) ops.schedule = pf_emu::Schedule::WarpByWarp;
          ASSERT_EQ(ops.dims(r.p.shape).smem_projection, smem);
          expect_resident_grads(r, ops, causal, kernel, P);
        }
  });
  // Fewer padded features than padded d (m = 24 < d = 64): the backward's
  // second sweep has no room to stage o and d_o in its feature tiles and
  // reads them from global memory; causal over 3 blocks, FAVOR+.
  for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
    const Case c{40, 64, 24, 16, 0};
    const ReferenceCase r(c, true, FeatureKernel::Softmax, 4690);
    SCOPED_TRACE(where(c, true, FeatureKernel::Softmax, 3) + " math=" + tile_math_name(math));
    EmulatedCudaOps ops{c.ct, c.seg_len};
    ops.math = math;
    ops.smem_state = true;
    ASSERT_LT(ops.dims(r.p.shape).mp, ops.dims(r.p.shape).dp);
    expect_resident_grads(r, ops, true, FeatureKernel::Softmax, 3);
  }
}

// The projection in shared memory (Dims::smem_projection): the resident
// kernels round W's elements once into the tensor cores' words beside the
// stage (Tiles::proj) and the projection products read them there, instead
// of rounding W's elements from global memory as each lane loads them. The
// lanes get the same bits, so o, dq, dk and dv are bit for bit those of the
// same run with W in global memory, and near the float64 reference. With
// the state in shared memory (Dims::smem_state): rows of 8 and 16 words
// (d = 16, m = 72, TF32 and bf16, 16-row tiles; d = 5, m = 200, bf16;
// d = 32, m = 208, bf16) and swizzled rows of 32 and 64 (d = 32, m = 208,
// TF32; d = 64, m = 128, bf16 and TF32), and TF32 at d = 16, m = 200 in
// feature slices of 96 (each block its slice's words); causal and
// bidirectional, over 1 and 3 blocks (the second one warp at a time). And
// the sizes the GPU benchmarks and the mission step run, d = 64, m = 256
// with 32-row tiles, TF32 and bf16: the first plan of favor_attention_cuda.cu
// on an H100 or H200, whose blocks may take 227 KiB of shared memory.
TEST(FavorCudaEmulated, ProjectionInSharedMemoryGivesTheSameBits) {
  struct ProjectionCase {
    Case c;
    FeatureKernel kernel;
    TileMath math;
    int64_t slice = 0;  // FavorShape::feature_slice
  };
  const ProjectionCase cases[] = {{Case{70, 16, 72, 16, 32}, FeatureKernel::Relu, TileMath::Tf32},
                                  {Case{70, 16, 72, 16, 32}, FeatureKernel::Softmax, TileMath::Bf16},
                                  {Case{100, 32, 208, 32, 64}, FeatureKernel::Softmax, TileMath::Tf32},
                                  {Case{100, 32, 208, 32, 64}, FeatureKernel::Elu, TileMath::Bf16},
                                  {Case{40, 5, 200, 32, 0}, FeatureKernel::Softmax, TileMath::Bf16},
                                  {Case{64, 64, 128, 32, 0}, FeatureKernel::Softmax, TileMath::Bf16},
                                  {Case{64, 64, 128, 32, 0}, FeatureKernel::Elu, TileMath::Tf32},
                                  {Case{90, 16, 200, 32, 32}, FeatureKernel::Softmax, TileMath::Tf32, 96},
                                  {Case{80, 64, 256, 32, 0}, FeatureKernel::Softmax, TileMath::Tf32},
                                  {Case{80, 64, 256, 32, 0}, FeatureKernel::Softmax, TileMath::Bf16}};
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
  };
  uint64_t seed = 4800;
  for (const ProjectionCase& x : cases) {
    for (bool causal : {true, false}) {
      const ReferenceCase r(x.c, causal, x.kernel, ++seed, 2.0);
      for (int P : {1, 3}) {
        SCOPED_TRACE(where(x.c, causal, x.kernel, P) + " math=" + tile_math_name(x.math));
        EmulatedCudaOps shared{x.c.ct, x.c.seg_len};
        shared.math = x.math;
        shared.smem_state = true;
        shared.slice = x.slice;
        if (P == 3) shared.schedule = pf_emu::Schedule::WarpByWarp;
        EmulatedCudaOps global = shared;
        global.smem_projection = false;
        ASSERT_TRUE(shared.dims(r.p.shape).smem_projection);
        ASSERT_FALSE(global.dims(r.p.shape).smem_projection);
        if (x.c.d == 64 && x.c.m == 256) {
          ASSERT_LE(smem_bytes(shared.dims(r.p.shape)), 227 * 1024);
        }
        const EmulatedRun e(r, shared, causal, P), g(r, global, causal, P);
        EXPECT_TRUE(same_bits(e.o, g.o));
        EXPECT_TRUE(same_bits(e.dq, g.dq));
        EXPECT_TRUE(same_bits(e.dk, g.dk));
        EXPECT_TRUE(same_bits(e.dv, g.dv));
        expect_resident_near_reference(e, r, x.math, x.kernel);
      }
    }
  }
}

// Feature slices (FavorShape::feature_slice, Dims::slices): a block per
// slice of 16 features, each with its own log-scales; the slices' parts of
// y and the row log-scales, of dq, dk and dv, and of the packed states
// combined exactly. m = 40: slices of 16, 16 and 8 features (the last
// padded); m = 33: 16, 16 and 1. Through the protocol over P = 1 and 3
// blocks, causal and bidirectional, every fixed-projection kernel, q and k
// at 1 and 2.5 times the unit scale (the slices' largest exponents then
// differ by several units), fp32 to 1e-5, and TF32 with one warp at a time
// to its 1e-2 (relu's dq, dk 0.1).
TEST(FavorCudaEmulated, FeatureSlicesMatchReference) {
  each_case({Case{150, 16, 40, 32, 80}, Case{9, 5, 33, 16, 0}}, 4500,
            [](const Case& c, bool causal, FeatureKernel kernel, uint64_t seed) {
              for (double scale : {1.0, 2.5}) {
                const ReferenceCase r(c, causal, kernel, seed, scale);
                for (int P : {1, 3}) {
                  SCOPED_TRACE(where(c, causal, kernel, P) + " scale=" + std::to_string(scale));
                  EmulatedCudaOps ops{c.ct, c.seg_len};
                  ops.slice = 16;
                  ops.smem_state = P == 3;
                  const EmulatedRun e(r, ops, causal, P);
                  EXPECT_LE(test::rel_l2(e.o, r.o), 1e-5);
                  EXPECT_LE(test::rel_l2(e.dq, r.dq), 1e-5);
                  EXPECT_LE(test::rel_l2(e.dk, r.dk), 1e-5);
                  EXPECT_LE(test::rel_l2(e.dv, r.dv), 1e-5);
                }
              }
            });
  // TF32 and bf16 (m = 40: the last slice of 8 features short of its padded 16).
  each_case({Case{64, 16, 40, 32, 0}}, 4550, [](const Case& c, bool causal, FeatureKernel kernel, uint64_t seed) {
    const ReferenceCase r(c, causal, kernel, seed);
    for (TileMath math : {TileMath::Tf32, TileMath::Bf16}) {
      SCOPED_TRACE(where(c, causal, kernel, 2) + " math=" + tile_math_name(math));
      EmulatedCudaOps ops{c.ct, c.seg_len};
      ops.slice = 16;
      ops.math = math;
      ops.schedule = pf_emu::Schedule::WarpByWarp;
      expect_tensor_cores_near_reference(EmulatedRun(r, ops, causal, 2), r, math, kernel);
    }
  });
}

// A long sequence (1,024 rows: 32 tiles of 32 in 4 segments, 3 blocks)
// whose q and k grow from 0.5 to 2 times the unit scale along it, so that
// the exponents of the later rows' features exceed the earlier ones' by
// several units and the running state is rescaled again and again: fp32 on
// the tile kernels to 1e-5, TF32 and bf16 on the resident kernels to their
// tolerances (FAVOR+'s positive features).
TEST(FavorCudaEmulated, LongSequenceWithGrowingLogScalesMatchesReference) {
  const Case c{1024, 16, 32, 32, 256};
  uint64_t seed = 4580;
  for (bool causal : {true, false}) {
    const ReferenceCase r(c, causal, FeatureKernel::Softmax, ++seed, 0.5, 3.0);
    for (TileMath math : {TileMath::Fp32, TileMath::Tf32, TileMath::Bf16}) {
      SCOPED_TRACE(where(c, causal, FeatureKernel::Softmax, 3) + " math=" + tile_math_name(math));
      EmulatedCudaOps ops{c.ct, c.seg_len};
      ops.math = math;
      const EmulatedRun e(r, ops, causal, 3);
      if (math == TileMath::Fp32) {
        EXPECT_LE(test::rel_l2(e.o, r.o), 1e-5);
        EXPECT_LE(test::rel_l2(e.dq, r.dq), 1e-5);
        EXPECT_LE(test::rel_l2(e.dk, r.dk), 1e-5);
        EXPECT_LE(test::rel_l2(e.dv, r.dv), 1e-5);
      } else {
        ASSERT_TRUE(ops.dims(r.p.shape).resident);
        expect_resident_near_reference(e, r, math, FeatureKernel::Softmax);
      }
    }
  }
}

// The projection gradient dW of the fixed-projection kernels (a test's
// request: the model trains only exp's), fused like exp's: one slot per
// block, summed per head in segment order, with one feature slice and with
// slices of 16 (m = 40: 16, 16, 8), through the protocol over 1 and 3
// blocks, against the float64 reference's dW [B*H, m, d].
TEST(FavorCudaEmulated, FixedProjectionGradMatchesReference) {
  each_case({Case{70, 16, 40, 32, 32}}, 4600, [](const Case& c, bool causal, FeatureKernel kernel, uint64_t seed) {
    const ReferenceCase r(c, causal, kernel, seed);
    const std::vector<double> rW = reference_weight_grad(r);
    for (int64_t slice : {int64_t{0}, int64_t{16}})
      for (int P : {1, 3}) {
        SCOPED_TRACE(where(c, causal, kernel, P) + " slice=" + std::to_string(slice));
        MemoryTracker tracker(Device::cpu());
        const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
        std::vector<float> o(r.size()), dq(r.size()), dk(r.size()), dv(r.size()), dW(rW.size(), 0.f);
        EmulatedCudaOps ops{c.ct, c.seg_len};
        ops.slice = slice;
        test::run_favor_protocol(ops, res.ctx(), r.p.shape, causal, P, r.q.data(), r.k.data(), r.v.data(), r.W.data(),
                                 r.g.data(), o.data(), dq.data(), dk.data(), dv.data(), dW.data());
        EXPECT_LE(test::rel_l2(o, r.o), 1e-5);
        EXPECT_LE(test::rel_l2(dq, r.dq), 1e-5);
        EXPECT_LE(test::rel_l2(dW, rW), 1e-5);
      }
  });
}

// The exp kernel: per-head projections W [H, m, d] (head h of B*H uses
// W_(h mod H)) and their gradient, summed over the P blocks like the ranks'
// allreduce, against the float64 reference.
TEST(FavorCudaEmulated, ExpTrainedProjectionsMatchReference) {
  const int64_t B = 2, H = 2, BH = B * H;
  uint64_t seed = 4200;
  for (const Case& c : {Case{7, 5, 7, 16, 0}, Case{150, 16, 32, 32, 80}}) {
    for (bool causal : {true, false}) {
      for (bool half_norm : {false, true}) {
        const int64_t size = BH * c.n * c.d, wsize = c.m * c.d;
        ++seed;
        const std::vector<float> q = test::cast_vector<float>(test::normal_vector(size, seed, 1));
        const std::vector<float> k = test::cast_vector<float>(test::normal_vector(size, seed, 2));
        const std::vector<float> v = test::cast_vector<float>(test::normal_vector(size, seed, 3));
        const std::vector<float> g = test::cast_vector<float>(test::normal_vector(size, seed, 4));
        // Trained projections differ from any draw: a draw per head plus noise.
        std::vector<float> W;
        for (int64_t h = 0; h < H; ++h) {
          const std::vector<float> Wh = random_projection_f32(
              {c.m, c.d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {seed, 1, static_cast<uint64_t>(h)});
          W.insert(W.end(), Wh.begin(), Wh.end());
        }
        const std::vector<double> noise = test::normal_vector(H * wsize, seed, 5);
        for (int64_t e = 0; e < H * wsize; ++e) W[e] += static_cast<float>(0.2 * noise[e]);
        const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end()),
            gd(g.begin(), g.end()), Wd(W.begin(), W.end());
        FavorAttentionParams p = favor_attention_params(B, H, c.n, c.d, c.m, causal, FeatureKernel::Exp);
        p.shape.features.half_norm = half_norm;
        p.shape.w_heads = H;
        std::vector<double> ro(size), rq(size), rk(size), rv(size), rW(BH * wsize, 0.0);
        favor_attention_forward_ref(p, qd.data(), kd.data(), vd.data(), Wd.data(), ro.data());
        favor_attention_backward_ref(p, qd.data(), kd.data(), vd.data(), Wd.data(), gd.data(), rq.data(), rk.data(),
                                     rv.data(), rW.data());
        // P = 4: three blocks again, the features in slices of 16 (m = 32: two);
        // P = 5: three blocks on the resident kernels in TF32 (the heads'
        // projections and dW there), P = 6 the same in slices of 16; P = 7
        // and 8 as 5 and 6 in bf16.
        for (int P : {1, 3, 4, 5, 6, 7, 8}) {
          const int blocks = P >= 4 ? 3 : P;
          const bool tensor = P >= 5, bf16 = P >= 7, sliced = P == 4 || P == 6 || P == 8;
          if (tensor && c.n < 100) continue;
          SCOPED_TRACE(testing::Message() << "n=" << c.n << " d=" << c.d << " m=" << c.m << " ct=" << c.ct
                                          << " seg_len=" << c.seg_len << " causal=" << causal << " half_norm="
                                          << half_norm << " P=" << blocks << " slices of " << (sliced ? 16 : c.m)
                                          << (bf16     ? " bf16"
                                              : tensor ? " tf32"
                                                       : ""));
          MemoryTracker tracker(Device::cpu());
          const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
          std::vector<float> o(size), dq(size), dk(size), dv(size), dW(BH * wsize, 0.f);
          const FavorShape shape = p.shape;
          ASSERT_EQ(shape.w_heads, H);
          EmulatedCudaOps ops{c.ct, c.seg_len};
          ops.smem_state = P == 3 || P == 5 || P == 7;
          ops.slice = sliced ? 16 : 0;
          if (tensor) {
            ops.math = bf16 ? TileMath::Bf16 : TileMath::Tf32;
            ASSERT_TRUE(ops.dims(shape).resident);
          }
          test::run_favor_protocol(ops, res.ctx(), shape, causal, blocks, q.data(), k.data(), v.data(), W.data(),
                                   g.data(), o.data(), dq.data(), dk.data(), dv.data(), dW.data());
          // TF32 and bf16: the resident tests' bounds (dW as ResidentProjectionGradMatchesReference's).
          const double tol = bf16 ? 3e-2 : tensor ? 3e-3 : 1e-5, qk_tol = bf16 ? 8e-2 : tensor ? 8e-3 : 1e-5;
          EXPECT_LE(test::rel_l2(o, ro), tol);
          EXPECT_LE(test::rel_l2(dq, rq), qk_tol);
          EXPECT_LE(test::rel_l2(dk, rk), qk_tol);
          EXPECT_LE(test::rel_l2(dv, rv), tol);
          EXPECT_LE(test::rel_l2(dW, rW), tol);
        }
      }
    }
  }
}

// The protocol over pieces (FavorPieces, the packed samples): one launch
// sequence per step over every piece's heads, the spans read from the
// device table, against the same steps piece by piece on contiguous copies
// (whose segments differ, hence fp32 rounding apart) and against the CPU's
// call over the same pieces. Pieces of 1 row, of less than a segment and of
// several segments and tiles (segments of 32 rows); exp's dW summed per head
// over its pieces. In fp32 (d = 5), and in TF32 and bf16 on the resident
// kernels (d = 16, m = 20: their staged copies from the pieces' rows; to
// TF32's tolerances, relu's dq and dk 0.1, and bf16's, 4e-2 and 0.3).
TEST(FavorCudaEmulated, PiecesMatchPieceByPieceAndTheCpu) {
  uint64_t seed = 4400;
  for (TileMath math : {TileMath::Fp32, TileMath::Tf32, TileMath::Bf16})
    for (bool causal : {true, false}) {
      for (FeatureKernel kernel : {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Exp}) {
        for (int64_t m : {7, 20}) {
          const bool tf32 = math != TileMath::Fp32, bf16 = math == TileMath::Bf16;
          if (tf32 && m != 20) continue;
          // m = 20: the features in slices of 16 and 4.
          SCOPED_TRACE(std::string("causal=") + std::to_string(causal) + " kernel=" + feature_kernel_name(kernel) +
                       " m=" + std::to_string(m) + " math=" + tile_math_name(math));
          const test::PiecesCase c(2, 100, tf32 ? 16 : 5, m, causal, kernel, {{1, 40, 59}, {100}, {3, 97}}, ++seed);
          MemoryTracker tracker(Device::cpu());
          const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
          EmulatedCudaOps emulated{32, 0};
          emulated.math = math;
          emulated.slice = m > 16 ? 16 : 0;
          emulated.smem_state = true;  // one launch over the pieces with the carried state in shared memory
          if (tf32) {
            ASSERT_TRUE(emulated.dims(c.shape(1, 1)).resident);
          }
          const test::PiecesResult one = test::run_pieces(emulated, res.ctx(), c, true);
          emulated.smem_state = false;
          const test::PiecesResult each = test::run_pieces(emulated, res.ctx(), c, false);
          const test::PiecesResult cpu = test::run_pieces(test::DispatchedFavorOps{}, res.ctx(), c, true);
          const double tol = bf16 ? 4e-2 : tf32 ? 1e-2 : 1e-5;
          const double qk_tol = tf32 && kernel == FeatureKernel::Relu ? (bf16 ? 0.3 : 0.1) : tol;
          for (const test::PiecesResult* other : {&each, &cpu}) {
            EXPECT_LE(test::rel_l2(one.o, other->o), tol);
            EXPECT_LE(test::state_rel_l2(one.total, other->total, c.shape(1, 1).state_size()), tol);
            EXPECT_LE(test::rel_l2(one.dq, other->dq), qk_tol);
            EXPECT_LE(test::rel_l2(one.dk, other->dk), qk_tol);
            EXPECT_LE(test::rel_l2(one.dv, other->dv), tol);
            EXPECT_LE(test::state_rel_l2(one.grad, other->grad, c.shape(1, 1).state_size()), tol);
            if (kernel == FeatureKernel::Exp) {
              EXPECT_LE(test::rel_l2(one.dW, other->dW), tol);
            }
          }
        }
      }
    }
}

}  // namespace
}  // namespace pf
