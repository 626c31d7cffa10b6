// The order of the fused CUDA FAVOR+ kernels' launches (favor_attention_cuda.cu):
// one protocol call's padded projection, temporaries and kernels (FusedCall),
// and the sequences of the protocol's steps, written against a launch policy
// so that the same code runs on a GPU and, for the tests, on the CPU under
// the block emulator of tests/support/cuda_block_emulator.h:
//   float* L.buffer(int64_t floats)      a temporary that lives as long as L
//   L.tiles(kernel, gx, gy, gz, smem_bytes, args)   kThreads per block, dynamic shared memory
//   L.grid(kernel, gx, gy, args...)      kThreads per block, no shared memory
//   L.copy(dst, src, floats)             device-to-device, in launch order
// The segments' key and query-gradient states (with the bidirectional dq),
// the causal forward, the causal backward and the prefix's or total's part
// of y run on the kernels that keep each warp's strip of the state in
// registers where the tile math runs on tensor cores and the slice fits
// them (Dims::resident), else on the tile kernels
// (favor_attention_cuda_tile_kernels.cuh).
// Included by exactly one translation unit per binary (its kernels have
// internal linkage); on nvcc builds the resident kernels come from files of
// their own (favor_attention_cuda_resident.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/favor_attention/favor_attention_cuda_fused.cuh"
#include "kernels/favor_attention/favor_attention_cuda_resident.cuh"
#include "kernels/favor_attention/favor_attention_cuda_states.cuh"
#include "kernels/favor_attention/favor_attention_cuda_tile_kernels.cuh"

namespace pf {
namespace favor_cuda {
namespace {

// The resident kernel `which` for the call's operand type, or `tiles` where
// the resident kernels do not take the call (Dims::resident): on nvcc
// builds from the resident kernels' own files, under the block emulator
// instantiated here.
inline TileKernel resident_or(const Dims& D, Resident which, TileKernel tiles) {
  if (!D.resident) return tiles;
#if defined(__CUDACC__)
  return D.math == TileMath::Bf16 ? resident_kernel_bf16(D, which) : resident_kernel_tf32(D, which);
#else
  return D.math == TileMath::Bf16 ? resident_kernel<TileMath::Bf16>(D, which)
                                  : resident_kernel<TileMath::Tf32>(D, which);
#endif
}
// The kernels the launch sequences run for the segments' key states, the
// causal backward's query-gradient states (no dq), the bidirectional
// backward's (with dq), the causal forward, the causal backward and the
// prefix's or total's part of y.
inline TileKernel key_segments_kernel(const Dims& D) { return resident_or(D, Resident::KeySegments, k_key_segments); }
inline TileKernel causal_query_segments_kernel(const Dims& D) {
  return resident_or(D, Resident::QuerySegments, k_query_segments);
}
inline TileKernel causal_forward_kernel(const Dims& D) {
  return resident_or(D, Resident::CausalForward, k_causal_forward);
}
inline TileKernel causal_backward_kernel(const Dims& D) {
  return resident_or(D, Resident::CausalBackward, k_causal_backward);
}
inline TileKernel add_prefix_kernel(const Dims& D) { return resident_or(D, Resident::AddPrefix, k_add_prefix); }
inline TileKernel bidirectional_query_segments_kernel(const Dims& D) {
  return resident_or(D, Resident::QuerySegmentsDq, k_query_segments);
}

// Bytes of temporaries one protocol call may hold at once, bounded by the
// sum of: the padded projections; the blocks' projection gradients (of a
// backward asked for dW: exp's trained projections, or a test's); the
// causal backward's two segment-state sets, one padded state per head and
// slice, and the slices' totals; and, with several slices, the slices'
// parts of the widest output set (y and row log-scales, or dq, dk and dv)
// over the call's rows. Independent of the tile rows.
inline int64_t fused_workspace_bytes(const FavorShape& s) {
  const Dims D = dims_for(s, 16, TileMath::Fp32);
  const int64_t count = s.heads * D.segs * D.slices, per_slice = s.heads * D.slices;
  const int64_t weight_grads = count * D.projection_floats();
  const int64_t states = 2 * (count * D.state_floats() + 2 * count) + per_slice * (2 * D.state_floats() + 1);
  const int64_t parts = D.slices > 1 ? D.slices * s.heads * s.n * std::max<int64_t>(D.D1 + 1, 3 * D.d) : 0;
  const int64_t floats = s.w_heads * D.slices * D.projection_floats() + weight_grads + states + parts;
  return floats * static_cast<int64_t>(sizeof(float));
}

// ---- the launch sequences ---------------------------------------------------------
// The heads of a call: `count` uniform blocks of D.n rows, or the spans of a
// pieces table on the device with `slots` dW slots; `extent` the rows of
// the buffers the call reaches.
struct Heads {
  int64_t count = 0;
  const int64_t* spans = nullptr;
  int64_t slots = 0;
  int64_t extent = 0;
};

// The call's heads: uniform, or the pieces' table (on the device).
inline Heads heads_of(const FavorShape& s) {
  if (!s.pieces) return Heads{s.heads, nullptr, s.heads, s.heads * s.n};
  return Heads{s.heads, s.pieces->table(), s.pieces->slots(), s.pieces->end()};
}

// One protocol call: the padded projection, the temporaries and the kernels.
// dW (null: W is held constant) receives the projection gradients of the
// call's kernels, through the blocks' slots, at add_weight_grads(). With
// several feature slices the kernels write their slices' parts of the
// outputs, which finish() combines into the call's outputs.
template <class Launch>
class FusedCall {
 public:
  FusedCall(Launch& launch, const Dims& D, const Heads& heads, const float* W, float* dW = nullptr)
      : L_(launch),
        D_(D),
        heads_(heads.count),
        spans_(heads.spans),
        slots_(heads.slots),
        extent_(heads.extent),
        dW_(dW) {
    a_ = Args{};
    a_.D = D;
    a_.extent = extent_;
    a_.spans = heads.spans;
    const int64_t floats = int64_t(D.w_heads) * D.slices * D.projection_floats();
    float* Wp = L_.buffer(floats);
    L_.grid(k_pad_projection, blocks_for(floats), 1, D, W, Wp);
    a_.Wp = Wp;
    if (dW) a_.dWp = L_.buffer(blocks() * D_.projection_floats());
  }
  // The rows the call's kernels read (null where they read none).
  Args& inputs(const float* q, const float* k, const float* v) {
    a_.q = q;
    a_.k = k;
    a_.v = v;
    return a_;
  }
  // For the backward kernels: the forward's o, den and row log-scales (only
  // read) and the gradient d_o.
  void output_grads(const float* o, const float* den, const float* row_scale, const float* d_o) {
    a_.o = o;
    a_.den = den;
    a_.L = const_cast<float*>(row_scale);
    a_.d_o = d_o;
  }
  // The forward's y and row log-scales, written or (accumulate) combined
  // with what they hold.
  void row_outputs(float* y, float* row_scale, bool accumulate = false) {
    y_ = y;
    rs_ = row_scale;
    accumulate_ = accumulate;
    a_.accumulate = accumulate && D_.slices == 1;
    a_.y = D_.slices == 1 ? y : L_.buffer(parts(D_.D1));
    a_.L = D_.slices == 1 ? row_scale : L_.buffer(parts(1));
  }
  // The gradients the call's kernels write (null where they write none), or
  // add to (accumulate).
  void input_grads(float* dq, float* dk, float* dv, bool accumulate = false) {
    grads_[0] = dq;
    grads_[1] = dk;
    grads_[2] = dv;
    accumulate_ = accumulate;
    a_.accumulate = accumulate && D_.slices == 1;
    float** to[3] = {&a_.dq, &a_.dk, &a_.dv};
    for (int i = 0; i < 3; ++i) *to[i] = grads_[i] && D_.slices > 1 ? L_.buffer(parts(D_.d)) : grads_[i];
  }
  // With several slices: their parts into the call's outputs.
  void finish() {
    if (D_.slices == 1) return;
    const unsigned rows = static_cast<unsigned>(std::min<int64_t>(ceil_div(D_.n, kWarps), 65535));
    if (y_)
      L_.grid(k_combine_rows, static_cast<unsigned>(heads_), rows, D_, extent_, spans_, static_cast<const float*>(a_.y),
              static_cast<const float*>(a_.L), y_, rs_, accumulate_);
    const float* parts_of[3] = {a_.dq, a_.dk, a_.dv};
    for (int i = 0; i < 3; ++i)
      if (grads_[i])
        L_.grid(k_sum_parts, static_cast<unsigned>(heads_), rows, D_, extent_, spans_, parts_of[i], D_.d, grads_[i],
                accumulate_);
  }

  void add_weight_grads() {
    if (dW_)
      L_.grid(k_sum_weight_grads, blocks_for(slots_ * D_.m_all * D_.d), 1, D_, heads_, spans_, slots_,
              static_cast<const float*>(a_.dWp), dW_);
  }

  // Segment states: forward and/or gradient, each with two log-scale arrays
  // (the segments' own, then the scanned ones).
  void segment_states(bool forward, bool gradient) {
    if (forward) {
      a_.fS = L_.buffer(blocks() * D_.state_floats());
      a_.fa = L_.buffer(2 * blocks());
    }
    if (gradient) {
      a_.gS = L_.buffer(blocks() * D_.state_floats());
      a_.ga = L_.buffer(2 * blocks());
    }
  }
  // One packed state per head, padded per slice for the kernels (its
  // log-scales are read from `packed`).
  void head_states(const float* packed) {
    const int64_t floats = heads_ * D_.slices * D_.state_floats();
    float* Sp = L_.buffer(floats);
    L_.grid(k_unpack_states, blocks_for(floats), 1, D_, heads_, packed, Sp);
    a_.Sp = Sp;
    a_.sa = packed;
  }
  void run(void (*kernel)(Args)) {
    L_.tiles(kernel, static_cast<unsigned>(heads_), static_cast<unsigned>(D_.segs), static_cast<unsigned>(D_.slices),
             smem_bytes(D_), a_);
  }
  // The segments' own states and log-scales (from a k_*_segments kernel)
  // become exclusive scans: the scanned log-scales go to the second half of
  // the log-scale buffer and are copied over the first. `total` (packed, or
  // null) receives each head's sum, the slices merged.
  void scan(float* states, float* log_scales, const float* init, float* total, bool reverse) {
    const int64_t per_slice = heads_ * D_.slices;
    float* total_S = total ? L_.buffer(per_slice * D_.state_floats()) : nullptr;
    float* total_a = total ? L_.buffer(per_slice) : nullptr;
    L_.grid(k_scan_segments, static_cast<unsigned>(per_slice),
            static_cast<unsigned>(ceil_div(D_.state_floats(), kThreads)), D_, states,
            static_cast<const float*>(log_scales), log_scales + blocks(), init, total_S, total_a, reverse);
    L_.copy(log_scales, log_scales + blocks(), blocks());
    if (total)
      L_.grid(k_merge_states, blocks_for(heads_ * D_.packed_size()), 1, D_, heads_, static_cast<const float*>(total_S),
              static_cast<const float*>(total_a), total);
  }

 private:
  static unsigned blocks_for(int64_t n) {
    return static_cast<unsigned>(std::min<int64_t>(ceil_div(n, kThreads), 4096));
  }
  int64_t blocks() const { return heads_ * D_.segs * D_.slices; }                  // the tile kernels' blocks
  int64_t parts(int width) const { return D_.slices * extent_ * int64_t(width); }  // [slices][extent][width]
  Launch& L_;
  Dims D_;
  int64_t heads_;
  const int64_t* spans_;
  int64_t slots_;
  int64_t extent_;
  float* dW_;
  Args a_;
  float *y_ = nullptr, *rs_ = nullptr;
  float* grads_[3] = {nullptr, nullptr, nullptr};
  bool accumulate_ = false;
};

template <class Launch>
void fused_key_state(Launch& launch, const Dims& D, const Heads& heads, const float* k, const float* v, const float* W,
                     float* total) {
  FusedCall<Launch> call(launch, D, heads, W);
  call.segment_states(true, false);
  Args& a = call.inputs(nullptr, k, v);
  call.run(key_segments_kernel(D));
  call.scan(a.fS, a.fa, nullptr, total, false);
}

template <class Launch>
void fused_causal_forward_local(Launch& launch, const Dims& D, const Heads& heads, const float* q, const float* k,
                                const float* v, const float* W, float* y, float* row_scale, float* block_total) {
  FusedCall<Launch> call(launch, D, heads, W);
  call.segment_states(true, false);
  Args& a = call.inputs(q, k, v);
  call.row_outputs(y, row_scale);
  call.run(key_segments_kernel(D));
  call.scan(a.fS, a.fa, nullptr, block_total, false);
  call.run(causal_forward_kernel(D));
  call.finish();
}

// y, row_scale (+)= the state's part (accumulate), or = it (bidirectional finish).
template <class Launch>
void fused_add_prefix(Launch& launch, const Dims& D, const Heads& heads, const float* q, const float* W,
                      const float* state, float* y, float* row_scale, bool accumulate) {
  FusedCall<Launch> call(launch, D, heads, W);
  call.head_states(state);
  call.inputs(q, nullptr, nullptr);
  call.row_outputs(y, row_scale, accumulate);
  call.run(add_prefix_kernel(D));
  call.finish();
}

template <class Launch>
void fused_causal_backward_local(Launch& launch, const Dims& D, const Heads& heads, const float* q, const float* k,
                                 const float* v, const float* W, const float* o, const float* den,
                                 const float* row_scale, const float* d_o, const float* prefix, float* dq, float* dk,
                                 float* dv, float* block_total_grad, float* dW) {
  FusedCall<Launch> call(launch, D, heads, W, dW);
  call.segment_states(true, true);
  Args& a = call.inputs(q, k, v);
  call.output_grads(o, den, row_scale, d_o);
  call.run(key_segments_kernel(D));
  call.scan(a.fS, a.fa, prefix, nullptr, false);
  call.run(causal_query_segments_kernel(D));  // a.dq is null: the causal gradient state only
  call.scan(a.gS, a.ga, nullptr, block_total_grad, true);
  call.input_grads(dq, dk, dv);
  call.run(causal_backward_kernel(D));
  call.finish();
  call.add_weight_grads();
}

// dk, dv (+)= the keys' part of a gradient state (suffix, or the bidirectional total).
template <class Launch>
void fused_key_grad_from_state(Launch& launch, const Dims& D, const Heads& heads, const float* k, const float* v,
                               const float* W, const float* state, float* dk, float* dv, bool accumulate, float* dW) {
  FusedCall<Launch> call(launch, D, heads, W, dW);
  call.head_states(state);
  call.inputs(nullptr, k, v);
  call.input_grads(nullptr, dk, dv, accumulate);
  call.run(k_key_grad_from_state);
  call.finish();
  call.add_weight_grads();
}

template <class Launch>
void fused_bidirectional_backward_local(Launch& launch, const Dims& D, const Heads& heads, const float* q,
                                        const float* W, const float* o, const float* den, const float* row_scale,
                                        const float* d_o, const float* total, float* dq, float* local_grad_total,
                                        float* dW) {
  FusedCall<Launch> call(launch, D, heads, W, dW);
  call.segment_states(false, true);
  call.head_states(total);
  Args& a = call.inputs(q, nullptr, nullptr);
  call.output_grads(o, den, row_scale, d_o);
  call.input_grads(dq, nullptr, nullptr);
  call.run(bidirectional_query_segments_kernel(D));
  call.scan(a.gS, a.ga, nullptr, local_grad_total, false);
  call.finish();
  call.add_weight_grads();
}

}  // namespace
}  // namespace favor_cuda
}  // namespace pf
