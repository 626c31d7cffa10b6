// Inputs, outputs and checks shared by the softmax attention kernel tests:
// random Q, K, V, dO in float64, the CPU kernel's forward and backward on
// their fp32 casts, the float64 reference, and the relative-L2 comparison
// of all five results; the inputs of the one-query decode.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/exec.h"
#include "tests/support/numerics.h"

namespace pf::softmax_test {

using test::cast_vector;
using test::normal_vector;
using test::rel_l2;

struct Inputs {
  std::vector<double> Q, K, V, dO;
};

inline Inputs make_inputs(const SoftmaxAttentionParams& p, uint64_t seed, double scale = 1.0) {
  const int64_t size = p.heads * p.n * p.d;
  return {normal_vector(size, seed, 1, scale), normal_vector(size, seed, 2, scale), normal_vector(size, seed, 3),
          normal_vector(size, seed, 4)};
}

struct Outputs {
  std::vector<float> O, lse, dQ, dK, dV;
};

inline Outputs run_cpu(const SoftmaxAttentionParams& p, const Inputs& in) {
  const auto Q = cast_vector<float>(in.Q), K = cast_vector<float>(in.K), V = cast_vector<float>(in.V),
             dO = cast_vector<float>(in.dO);
  const size_t size = Q.size();
  Outputs out{std::vector<float>(size), std::vector<float>(p.heads * p.n), std::vector<float>(size),
              std::vector<float>(size), std::vector<float>(size)};
  ExecContext ctx;
  softmax_attention_forward(ctx, p, Q.data(), K.data(), V.data(), out.O.data(), out.lse.data());
  softmax_attention_backward(ctx, p, Q.data(), K.data(), V.data(), out.O.data(), out.lse.data(), dO.data(),
                             out.dQ.data(), out.dK.data(), out.dV.data());
  return out;
}

struct Reference {
  std::vector<double> O, lse, dQ, dK, dV;
};

// Rows [row0, row0 + len) of buffers of rows of d (lse: of 1): one piece's part.
template <typename T>
std::vector<T> rows_of(const std::vector<T>& x, int64_t row0, int64_t len, int64_t width) {
  return std::vector<T>(x.begin() + row0 * width, x.begin() + (row0 + len) * width);
}
inline Inputs rows_of(const Inputs& in, int64_t row0, int64_t len, int64_t d) {
  return {rows_of(in.Q, row0, len, d), rows_of(in.K, row0, len, d), rows_of(in.V, row0, len, d),
          rows_of(in.dO, row0, len, d)};
}
inline Outputs rows_of(const Outputs& out, int64_t row0, int64_t len, int64_t d) {
  return {rows_of(out.O, row0, len, d), rows_of(out.lse, row0, len, 1), rows_of(out.dQ, row0, len, d),
          rows_of(out.dK, row0, len, d), rows_of(out.dV, row0, len, d)};
}

// out += more, field by field (the rows of several pieces in one set).
template <typename S>
void append(S& out, const S& more) {
  for (auto field : {&S::O, &S::lse, &S::dQ, &S::dK, &S::dV})
    (out.*field).insert((out.*field).end(), (more.*field).begin(), (more.*field).end());
}

inline Reference run_ref(const SoftmaxAttentionParams& p, const Inputs& in) {
  const size_t size = in.Q.size();
  Reference r{std::vector<double>(size), std::vector<double>(p.heads * p.n), std::vector<double>(size),
              std::vector<double>(size), std::vector<double>(size)};
  softmax_attention_forward_ref(p, in.Q.data(), in.K.data(), in.V.data(), r.O.data(), r.lse.data());
  softmax_attention_backward_ref(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), r.dQ.data(), r.dK.data(),
                                 r.dV.data());
  return r;
}

inline void expect_close(const Outputs& got, const Reference& want, double tol, const std::string& what) {
  const double grad_norm = test::l2_norm(want.dV);
  EXPECT_LE(rel_l2(got.O, want.O), tol) << what << " O";
  EXPECT_LE(rel_l2(got.lse, want.lse), tol) << what << " lse";
  EXPECT_LE(test::rel_l2_or(got.dQ, want.dQ, grad_norm), tol) << what << " dQ";
  EXPECT_LE(test::rel_l2_or(got.dK, want.dK, grad_norm), tol) << what << " dK";
  EXPECT_LE(rel_l2(got.dV, want.dV), tol) << what << " dV";
}

inline std::string describe(const SoftmaxAttentionParams& p) {
  return "heads=" + std::to_string(p.heads) + " n=" + std::to_string(p.n) + " d=" + std::to_string(p.d) +
         " causal=" + std::to_string(p.causal) + " window=" + std::to_string(p.window) +
         " q_tile=" + std::to_string(p.q_tile) + " k_tile=" + std::to_string(p.k_tile);
}

// One query per head against n keys at stride n d + gap (softmax_attention_decode).
struct DecodeCase {
  SoftmaxAttentionParams p;
  int64_t stride;
  std::vector<double> q, K, V;
};

inline DecodeCase make_case(int64_t heads, int64_t n, int64_t d, int64_t gap, uint64_t seed, double scale = 1.0) {
  DecodeCase c;
  c.p = softmax_attention_decode_params(heads, n, d);
  c.stride = n * d + gap;
  c.q = normal_vector(heads * d, seed, 1, scale);
  c.K = normal_vector(heads * c.stride, seed, 2, scale);
  c.V = normal_vector(heads * c.stride, seed, 3);
  return c;
}

}  // namespace pf::softmax_test
