// Exact softmax attention: CPU tiled kernel against the float64 reference
// (forward O and lse, backward dQ, dK, dV) over n, d, tile sizes that do and
// do not divide n, causal and bidirectional; finite-difference checks of the
// reference backward; strict causality; local windows (against the
// reference, finite differences, exactly the keys inside, a window of n or
// more is no window); large input norms; O(n d) scratch;
// the storage-typed overloads (f32 on the CPU; f16/bf16 refused there).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/softmax_attention/softmax_attention.h"
#include "kernels/softmax_attention/softmax_attention_math.h"
#include "runtime/errors.h"
#include "runtime/memory.h"
#include "runtime/row_spans.h"
#include "tests/kernels/softmax_attention_support.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

using namespace softmax_test;
using test::normal_vector;
using test::rel_l2;

TEST(SoftmaxAttention, CpuMatchesFloat64Reference) {
  struct Tiles {
    int64_t q, k;
  };
  uint64_t seed = 100;
  for (int64_t n : {1, 7, 64, 1000})
    for (int64_t d : {16, 32, 64})
      for (bool causal : {false, true}) {
        SoftmaxAttentionParams p = softmax_attention_params(n < 1000 ? 3 : 1, n, d, causal);
        const Inputs in = make_inputs(p, ++seed);
        const Reference want = run_ref(p, in);
        // Defaults (64 x 128), tiles dividing n = 64, and tiles dividing nothing.
        for (Tiles t : {Tiles{64, 128}, Tiles{16, 32}, Tiles{7, 5}, Tiles{48, 80}}) {
          p.q_tile = t.q;
          p.k_tile = t.k;
          expect_close(run_cpu(p, in), want, 1e-5, describe(p));
        }
      }
}

// Local windows: windows of one key, shorter and longer than the tiles, and
// as long as the sequence, with tiles that divide nothing.
TEST(SoftmaxAttention, WindowedCpuMatchesFloat64Reference) {
  struct Tiles {
    int64_t q, k;
  };
  uint64_t seed = 300;
  for (int64_t n : {1, 7, 64, 300})
    for (int64_t window : {1, 5, 37, 64, 299, 1000})
      for (bool causal : {false, true}) {
        SoftmaxAttentionParams p = softmax_attention_params(2, n, 16, causal, window);
        const Inputs in = make_inputs(p, ++seed);
        const Reference want = run_ref(p, in);
        for (Tiles t : {Tiles{64, 128}, Tiles{16, 32}, Tiles{7, 5}}) {
          p.q_tile = t.q;
          p.k_tile = t.k;
          expect_close(run_cpu(p, in), want, 1e-5, describe(p));
        }
      }
}

// The window's keys and only those: changing q, k, v at one position j
// changes exactly the outputs of the queries that see key j (and j itself),
// bit for bit nothing else; a window of n or more is the unwindowed kernel,
// bit for bit.
TEST(SoftmaxAttention, WindowSeesExactlyItsKeys) {
  for (bool causal : {true, false}) {
    SoftmaxAttentionParams p = softmax_attention_tiled_params(1, 150, 16, causal, 16, 20);
    p.window = 23;
    const Inputs base = make_inputs(p, 12);
    const Outputs o0 = run_cpu(p, base);
    for (int64_t j : {0, 40, 149}) {
      Inputs changed = base;
      for (int64_t k = 0; k < p.d; ++k) {
        changed.K[j * p.d + k] += 1.5;
        changed.V[j * p.d + k] -= 2.0;
      }
      const Outputs o1 = run_cpu(p, changed);
      for (int64_t i = 0; i < p.n; ++i) {
        const bool sees = causal ? i >= j && i - j < p.window : std::abs(i - j) < p.window;
        bool same = o0.lse[i] == o1.lse[i];
        for (int64_t k = 0; k < p.d; ++k) same = same && o0.O[i * p.d + k] == o1.O[i * p.d + k];
        EXPECT_EQ(same, !sees) << "causal=" << causal << " key " << j << " query " << i;
      }
    }
    SoftmaxAttentionParams none = p;
    none.window = 0;
    for (int64_t w : {p.n, p.n + 7}) {
      p.window = w;
      const Outputs a = run_cpu(p, base), b = run_cpu(none, base);
      EXPECT_EQ(a.O, b.O) << "window " << w;
      EXPECT_EQ(a.lse, b.lse) << "window " << w;
      EXPECT_EQ(a.dQ, b.dQ) << "window " << w;
      EXPECT_EQ(a.dK, b.dK) << "window " << w;
      EXPECT_EQ(a.dV, b.dV) << "window " << w;
    }
  }
}

TEST(SoftmaxAttention, LongSequenceMatchesReference) {
  for (bool causal : {true, false}) {
    const SoftmaxAttentionParams p =
        softmax_attention_tiled_params(1, 4099, causal ? 16 : 32, causal, causal ? 64 : 128, causal ? 96 : 256);
    const Inputs in = make_inputs(p, 7);
    expect_close(run_cpu(p, in), run_ref(p, in), 1e-5, describe(p));
  }
}

TEST(SoftmaxAttention, ExplicitScale) {
  for (bool causal : {false, true}) {
    SoftmaxAttentionParams p = softmax_attention_tiled_params(2, 50, 24, causal, 16, 20);
    p.scale = 0.37f;
    const Inputs in = make_inputs(p, 8);
    const Reference want = run_ref(p, in);
    expect_close(run_cpu(p, in), want, 1e-5, describe(p));
    // The reference must really use the given scale, not 1/sqrt(d).
    p.scale = 0.f;
    EXPECT_GT(rel_l2(run_ref(p, in).O, want.O), 1e-3);
  }
}

// Loss L = sum(O * G): dL/dX from the reference backward against central
// differences of the reference forward, every entry, in float64.
TEST(SoftmaxAttention, ReferenceBackwardMatchesFiniteDifferences) {
  for (int64_t window : {0, 2})
    for (bool causal : {false, true}) {
      const SoftmaxAttentionParams p = softmax_attention_params(2, 6, 4, causal, window);
      Inputs in = make_inputs(p, 9);
      const Reference ref = run_ref(p, in);
      auto loss = [&](const Inputs& x) {
        std::vector<double> O(x.Q.size()), lse(p.heads * p.n);
        softmax_attention_forward_ref(p, x.Q.data(), x.K.data(), x.V.data(), O.data(), lse.data());
        double s = 0;
        for (size_t i = 0; i < O.size(); ++i) s += O[i] * x.dO[i];
        return s;
      };
      const double h = 1e-6;
      std::vector<double>* vars[] = {&in.Q, &in.K, &in.V};
      const std::vector<double>* grads[] = {&ref.dQ, &ref.dK, &ref.dV};
      for (int v = 0; v < 3; ++v) {
        std::vector<double> fd(in.Q.size());
        for (size_t i = 0; i < fd.size(); ++i) {
          const double x0 = (*vars[v])[i];
          (*vars[v])[i] = x0 + h;
          const double lp = loss(in);
          (*vars[v])[i] = x0 - h;
          const double lm = loss(in);
          (*vars[v])[i] = x0;
          fd[i] = (lp - lm) / (2 * h);
        }
        EXPECT_LE(rel_l2(*grads[v], fd), 1e-7) << "variable " << v << " causal=" << causal << " window=" << window;
      }
    }
}

// Changing q, k, v after position i leaves O and lse at positions <= i
// bit-for-bit unchanged: masked scores never enter the row max or the sums.
TEST(SoftmaxAttention, StrictCausality) {
  const SoftmaxAttentionParams p = softmax_attention_tiled_params(2, 200, 32, true, 24, 40);
  const Inputs base = make_inputs(p, 10);
  const Outputs o0 = run_cpu(p, base);
  for (int64_t i : {0, 23, 24, 117, 198}) {
    Inputs changed = base;
    const std::vector<double> noise = normal_vector(p.heads * p.n * p.d, 11 + i, 0, 3.0);
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t j = i + 1; j < p.n; ++j)
        for (int64_t k = 0; k < p.d; ++k) {
          const int64_t at = (h * p.n + j) * p.d + k;
          changed.Q[at] += noise[at];
          changed.K[at] -= noise[at];
          changed.V[at] *= noise[at];
        }
    const Outputs o1 = run_cpu(p, changed);
    int64_t differing = 0, changed_after = 0;
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t j = 0; j < p.n; ++j) {
        bool same = o0.lse[h * p.n + j] == o1.lse[h * p.n + j];
        for (int64_t k = 0; k < p.d; ++k) same = same && o0.O[(h * p.n + j) * p.d + k] == o1.O[(h * p.n + j) * p.d + k];
        if (j <= i)
          differing += !same;
        else
          changed_after += !same;
      }
    EXPECT_EQ(differing, 0) << "positions <= " << i << " changed";
    EXPECT_EQ(changed_after, p.heads * (p.n - 1 - i)) << "the perturbation after " << i << " had no effect";
  }
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// Inputs 10x the unit scale give scores in the hundreds: no overflow, and the
// result still follows the reference. Scores of size ~|s| carry fp32 rounding
// ~|s| * 6e-8 into every exponent, so the tolerance grows with the norms
// (measured: ~2e-6 on O, ~2e-5 on dQ and dK at 10x).
TEST(SoftmaxAttention, LargeNormsStayFinite) {
  for (bool causal : {false, true}) {
    const SoftmaxAttentionParams p = softmax_attention_tiled_params(2, 129, 64, causal, 32, 48);
    const Inputs in = make_inputs(p, 12, 10.0);
    const Outputs got = run_cpu(p, in);
    for (const auto* v : {&got.O, &got.lse, &got.dQ, &got.dK, &got.dV}) EXPECT_TRUE(all_finite(*v)) << describe(p);
    expect_close(got, run_ref(p, in), 2e-4, describe(p));
  }
}

// The tracked scratch is exactly the workspace formula, and that formula does
// not grow with n (forward) or grows linearly, by one float per row and
// thread (backward): never O(n^2).
TEST(SoftmaxAttention, ScratchIsLinearInSequenceLength) {
  const SoftmaxAttentionParams p = softmax_attention_params(2, 2048, 32, true);
  const Inputs in = make_inputs(p, 13);
  const auto Q = cast_vector<float>(in.Q), K = cast_vector<float>(in.K), V = cast_vector<float>(in.V),
             dO = cast_vector<float>(in.dO);
  std::vector<float> O(Q.size()), lse(p.heads * p.n), dQ(Q.size()), dK(Q.size()), dV(Q.size());
  MemoryTracker tracker(Device::cpu());
  ExecContext ctx;
  ctx.tracker = &tracker;
  const int threads = omp_get_max_threads();
  softmax_attention_forward(ctx, p, Q.data(), K.data(), V.data(), O.data(), lse.data());
  EXPECT_EQ(tracker.stats().peak_bytes, softmax_attention_forward_workspace_bytes(p, Device::cpu(), threads));
  EXPECT_EQ(tracker.stats().current_bytes, 0);
  tracker.reset_peak();
  softmax_attention_backward(ctx, p, Q.data(), K.data(), V.data(), O.data(), lse.data(), dO.data(), dQ.data(),
                             dK.data(), dV.data());
  EXPECT_EQ(tracker.stats().peak_bytes, softmax_attention_backward_workspace_bytes(p, Device::cpu(), threads));
  EXPECT_EQ(tracker.stats().current_bytes, 0);

  SoftmaxAttentionParams big = p;
  big.d = 64;
  for (int64_t n = 1024; n <= (int64_t{1} << 20); n *= 4) {
    big.n = n;
    const int64_t fwd = softmax_attention_forward_workspace_bytes(big, Device::cpu(), threads);
    const int64_t bwd = softmax_attention_backward_workspace_bytes(big, Device::cpu(), threads);
    SoftmaxAttentionParams twice = big;
    twice.n = 2 * n;
    EXPECT_EQ(softmax_attention_forward_workspace_bytes(twice, Device::cpu(), threads), fwd) << "n=" << n;
    EXPECT_EQ(softmax_attention_backward_workspace_bytes(twice, Device::cpu(), threads) - bwd, int64_t{4} * threads * n)
        << "n=" << n;
    EXPECT_LT(bwd, int64_t{4} * threads * (n * big.d + 2 * 64 * 128 + n)) << "n=" << n;
  }
}

// The shared exp: relative error against std::exp over its whole range, the
// clamp above ln(2)/2, and exact zeros for underflow and -inf.
TEST(SoftmaxAttention, SharedExpIsAccurate) {
  double worst = 0;
  const int64_t points = int64_t{1} << 21;
  for (int64_t i = 0; i <= points; ++i) {
    const float x = static_cast<float>(-87.29 + (87.29 + 0.34) * static_cast<double>(i) / points);
    worst = std::max(worst, std::fabs(softmax_exp(x) / std::exp(static_cast<double>(x)) - 1.0));
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(softmax_exp(0.f), 1.f);
  EXPECT_EQ(softmax_exp(-87.31f), 0.f);
  EXPECT_EQ(softmax_exp(-1e30f), 0.f);
  EXPECT_EQ(softmax_exp(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(softmax_rescale(-std::numeric_limits<float>::infinity(), 2.f), 0.f);
  EXPECT_EQ(softmax_rescale(3.f, 3.f), 1.f);
}

TEST(SoftmaxAttention, EmptyAndInvalidShapes) {
  SoftmaxAttentionParams p = softmax_attention_params(2, 0, 8, false);
  ExecContext ctx;
  softmax_attention_forward(ctx, p, nullptr, nullptr, nullptr, nullptr, nullptr);  // nothing to do
  p.n = 4;
  p.d = 0;
  EXPECT_THROW(softmax_attention_forward(ctx, p, nullptr, nullptr, nullptr, nullptr, nullptr), ValueError);
  p.d = 8;
  p.k_tile = 0;
  EXPECT_THROW(softmax_attention_forward(ctx, p, nullptr, nullptr, nullptr, nullptr, nullptr), ValueError);
  p.k_tile = 16;
  p.window = -1;
  EXPECT_THROW(softmax_attention_forward(ctx, p, nullptr, nullptr, nullptr, nullptr, nullptr), ValueError);
  p.window = 0;
  p.scale = std::nanf("");
  EXPECT_THROW(softmax_attention_scale(p), ValueError);
  p.scale = 0.f;
  EXPECT_FLOAT_EQ(softmax_attention_scale(p), 1.f / std::sqrt(8.f));
}

// The storage overloads: f32 is the fp32 path exactly; f16/bf16 are CUDA-only
// and the CPU refuses them with a ValueError naming the dtype.
TEST(SoftmaxAttention, StorageOverloadsOnCpu) {
  const SoftmaxAttentionParams p = softmax_attention_params(2, 37, 16, true);
  const Inputs in = make_inputs(p, 4242);
  const auto Q = cast_vector<float>(in.Q), K = cast_vector<float>(in.K), V = cast_vector<float>(in.V),
             dO = cast_vector<float>(in.dO);
  const int64_t size = p.heads * p.n * p.d;
  std::vector<float> O(size), O2(size), lse(p.heads * p.n), lse2(p.heads * p.n), dQ(size), dK(size), dV(size),
      dQ2(size), dK2(size), dV2(size);
  ExecContext ctx;
  softmax_attention_forward(ctx, p, Q.data(), K.data(), V.data(), O.data(), lse.data());
  softmax_attention_forward(ctx, p, DType::f32, Q.data(), K.data(), V.data(), O2.data(), lse2.data());
  EXPECT_EQ(O, O2);
  EXPECT_EQ(lse, lse2);
  softmax_attention_backward(ctx, p, Q.data(), K.data(), V.data(), O.data(), lse.data(), dO.data(), dQ.data(),
                             dK.data(), dV.data());
  softmax_attention_backward(ctx, p, DType::f32, Q.data(), K.data(), V.data(), O.data(), lse.data(), dO.data(),
                             dQ2.data(), dK2.data(), dV2.data());
  EXPECT_EQ(dQ, dQ2);
  EXPECT_EQ(dK, dK2);
  EXPECT_EQ(dV, dV2);
  for (DType t : {DType::f16, DType::bf16}) {
    const std::string name = dtype_name(t);
    try {
      softmax_attention_forward(ctx, p, t, Q.data(), K.data(), V.data(), O2.data(), lse2.data());
      ADD_FAILURE() << "forward accepted " << name << " on the CPU";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    try {
      softmax_attention_backward(ctx, p, t, Q.data(), K.data(), V.data(), O.data(), lse.data(), dO.data(), dQ2.data(),
                                 dK2.data(), dV2.data());
      ADD_FAILURE() << "backward accepted " << name << " on the CPU";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// One call over pieces of rows (SoftmaxAttentionParams::pieces) gives each
// piece the bits of a call on that piece alone, the queries seeing only
// their piece's keys; rows between the pieces are not touched. A call whose
// heads and n are not the pieces' is refused, and so is the decode.
TEST(SoftmaxAttention, PiecesEqualPieceByPiece) {
  const int64_t total = 200, d = 8;
  const std::vector<RowSpan> spans = {{0, 50, 0}, {60, 1, 0}, {61, 0, 0}, {70, 129, 0}};
  MemoryTracker tracker(Device::cpu());
  ExecContext ctx;
  ctx.tracker = &tracker;
  const RowSpans pieces(ctx, spans);
  uint64_t seed = 3300;
  for (int64_t window : {0, 16})
    for (bool causal : {false, true}) {
      const SoftmaxAttentionParams whole = softmax_attention_params(1, total, d, causal, window);
      const Inputs in = make_inputs(whole, ++seed);
      const auto Q = cast_vector<float>(in.Q), K = cast_vector<float>(in.K), V = cast_vector<float>(in.V),
                 dO = cast_vector<float>(in.dO);
      const float sentinel = 7.f;
      std::vector<float> O(Q.size(), sentinel), lse(total, sentinel), dQ(Q.size(), sentinel), dK(Q.size(), sentinel),
          dV(Q.size(), sentinel);
      const SoftmaxAttentionParams p = softmax_pieces_params(whole, pieces);
      softmax_attention_forward(ctx, p, Q.data(), K.data(), V.data(), O.data(), lse.data());
      softmax_attention_backward(ctx, p, Q.data(), K.data(), V.data(), O.data(), lse.data(), dO.data(), dQ.data(),
                                 dK.data(), dV.data());
      std::vector<bool> inside(total, false);
      for (const RowSpan& x : spans) {
        for (int64_t r = x.row0; r < x.row0 + x.len; ++r) inside[static_cast<size_t>(r)] = true;
        if (x.len == 0) continue;
        const SoftmaxAttentionParams one = softmax_attention_params(1, x.len, d, causal, window);
        const Outputs want = run_cpu(one, rows_of(in, x.row0, x.len, d));
        const Outputs got = rows_of(Outputs{O, lse, dQ, dK, dV}, x.row0, x.len, d);
        const std::string what = "window=" + std::to_string(window) + " causal=" + std::to_string(causal) +
                                 " piece at row " + std::to_string(x.row0);
        EXPECT_EQ(got.O, want.O) << what;
        EXPECT_EQ(got.lse, want.lse) << what;
        EXPECT_EQ(got.dQ, want.dQ) << what;
        EXPECT_EQ(got.dK, want.dK) << what;
        EXPECT_EQ(got.dV, want.dV) << what;
      }
      for (int64_t r = 0; r < total; ++r) {
        if (inside[static_cast<size_t>(r)]) continue;
        EXPECT_EQ(lse[static_cast<size_t>(r)], sentinel) << "gap row " << r;
        for (int64_t c = 0; c < d; ++c) {
          const size_t e = static_cast<size_t>(r * d + c);
          EXPECT_TRUE(O[e] == sentinel && dQ[e] == sentinel && dK[e] == sentinel && dV[e] == sentinel)
              << "gap row " << r;
        }
      }
    }
  SoftmaxAttentionParams bad = softmax_pieces_params(softmax_attention_params(1, total, d, true), pieces);
  bad.n = total;
  try {
    softmax_attention_check(bad);
    ADD_FAILURE() << "n other than the longest piece was taken";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("over 4 pieces (the longest 129 rows) needs heads=4 and n=129"),
              std::string::npos)
        << e.what();
  }
  std::vector<float> q(d), kv(total * d), o(d);
  EXPECT_THROW(softmax_attention_decode(ctx, softmax_pieces_params(softmax_attention_decode_params(1, 1, d), pieces),
                                        total * d, q.data(), kv.data(), kv.data(), o.data()),
               ValueError);
}

}  // namespace
}  // namespace pf
