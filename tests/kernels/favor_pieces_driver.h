// Test driver of the FAVOR+ protocol over pieces (favor_attention.h,
// FavorPieces): B samples of H heads and n rows, each sample cut into pieces
// of given lengths, and every protocol step run either once over all pieces
// (each piece's head a span of the full buffers, as model/attention_packed.cc
// calls it) or piece by piece on contiguous copies of its rows (the blocks of
// H heads the protocol took before pieces existed). Steps run in the same
// order both ways (each step over every piece, then the next step), so the
// projection gradient dW [H, m, d] adds in the same order.
//   causal:        causal_forward_local -> add_prefix (the total of another
//                  piece) -> normalise -> causal_backward_local (that prefix)
//                  -> backward_add_suffix (another piece's gradient total);
//   bidirectional: key_state -> bidirectional_forward_finish -> normalise ->
//                  bidirectional_backward_local -> bidirectional_backward_finish.
// Works on any device: inputs and results are host vectors, copied with
// copy_bytes_blocking.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"
#include "tests/support/numerics.h"

namespace pf {
namespace test {

struct PiecesCase {
  int64_t H = 2, n = 0, d = 0, m = 0;
  bool causal = true;
  FeatureKernel kernel = FeatureKernel::Softmax;
  int64_t slab_rows = 0;                      // FavorShape::slab_rows
  std::vector<std::vector<int64_t>> lengths;  // per sample, summing to n
  std::vector<float> q, k, v, g, W;

  PiecesCase(int64_t heads, int64_t rows, int64_t dim, int64_t features, bool is_causal, FeatureKernel k_,
             std::vector<std::vector<int64_t>> pieces, uint64_t seed)
      : H(heads), n(rows), d(dim), m(features), causal(is_causal), kernel(k_), lengths(std::move(pieces)) {
    const int64_t size = B() * H * n * d;
    q = cast_vector<float>(normal_vector(size, seed, 1));
    k = cast_vector<float>(normal_vector(size, seed, 2));
    v = cast_vector<float>(normal_vector(size, seed, 3));
    g = cast_vector<float>(normal_vector(size, seed, 4));
    for (int64_t w = 0; w < w_heads(); ++w) {
      const std::vector<float> Ww = random_projection_f32({m, d, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms},
                                                          {seed, 7, static_cast<uint64_t>(w)});
      W.insert(W.end(), Ww.begin(), Ww.end());
    }
  }
  int64_t B() const { return static_cast<int64_t>(lengths.size()); }
  int64_t w_heads() const { return kernel == FeatureKernel::Exp ? H : 1; }
  bool trains_w() const { return kernel == FeatureKernel::Exp; }
  FavorShape shape(int64_t heads, int64_t rows) const {
    FavorShape s;
    s.heads = heads;
    s.n = rows;
    s.d = d;
    s.m = m;
    s.features = default_feature_params(kernel, d);
    s.slab_rows = slab_rows;
    s.w_heads = w_heads();
    return s;
  }
  struct Piece {
    int64_t b, begin, len;
  };
  std::vector<Piece> pieces() const {
    std::vector<Piece> out;
    for (int64_t b = 0; b < B(); ++b) {
      int64_t begin = 0;
      for (int64_t len : lengths[static_cast<size_t>(b)]) {
        out.push_back({b, begin, len});
        begin += len;
      }
    }
    return out;
  }
};

struct PiecesResult {
  std::vector<float> y, rs, o, den, total, dq, dk, dv, grad, dW;
};

template <class Ops>
PiecesResult run_pieces(const Ops& ops, const ExecContext& ctx, const PiecesCase& c, bool batched) {
  MemoryTracker& tr = *ctx.tracker;
  const Device dev = ctx.device;
  const int64_t H = c.H, n = c.n, d = c.d, D1 = d + 1, rows = c.B() * H * n;
  const std::vector<PiecesCase::Piece> pieces = c.pieces();
  const int64_t P = static_cast<int64_t>(pieces.size());
  const int64_t ss = c.shape(1, 1).state_size(), heads = P * H;
  auto tensor = [&](int64_t floats) { return Tensor::empty({std::max<int64_t>(floats, 1)}, DType::f32, tr, "test"); };
  auto upload = [&](const std::vector<float>& x) {
    Tensor t = tensor(static_cast<int64_t>(x.size()));
    copy_bytes_blocking(t.raw(), dev, x.data(), Device::cpu(), static_cast<int64_t>(x.size() * sizeof(float)));
    return t;
  };
  auto download = [&](const Tensor& t, int64_t floats) {
    synchronize(ctx.stream);
    std::vector<float> x(static_cast<size_t>(floats));
    copy_bytes_blocking(x.data(), Device::cpu(), t.raw(), dev, floats * static_cast<int64_t>(sizeof(float)));
    return x;
  };
  const Tensor q = upload(c.q), k = upload(c.k), v = upload(c.v), g = upload(c.g), W = upload(c.W);
  Tensor y = tensor(rows * D1), rs = tensor(rows), o = tensor(rows * d), den = tensor(rows);
  Tensor dq = tensor(rows * d), dk = tensor(rows * d), dv = tensor(rows * d);
  Tensor T = tensor(heads * ss), G = tensor(heads * ss), dW = upload(std::vector<float>(H * c.m * d, 0.f));
  float* dWp = c.trains_w() ? dW.data<float>() : nullptr;
  // Another piece's states as the prefix or suffix of each piece's heads.
  auto rotated = [&](const Tensor& S, int64_t by) {
    Tensor r = tensor(heads * ss);
    for (int64_t i = 0; i < heads; ++i)
      copy_bytes(ctx.stream, r.data<float>() + i * ss, dev, S.data<float>() + (i + by * H) % heads * ss, dev, ss * 4);
    return r;
  };

  // One protocol step: f(shape, rows of the buffers (width -> pointer), states of the call (pointer -> pointer)).
  std::vector<FavorSpan> spans;
  for (const PiecesCase::Piece& x : pieces)
    for (int64_t h = 0; h < H; ++h) spans.push_back({(x.b * H + h) * n + x.begin, x.len, h});
  const FavorPieces table(ctx, spans);
  struct Moved {
    float* full;
    Tensor copy;
    int64_t width;
  };
  auto step = [&](auto f) {
    if (batched) {
      const FavorShape s = favor_pieces_shape(c.shape(0, 0), table);
      f(
          s, [&](const Tensor& t, int64_t) { return const_cast<float*>(t.data<float>()); },
          [&](const Tensor& t) { return const_cast<float*>(t.data<float>()); });
      synchronize(ctx.stream);
      return;
    }
    for (int64_t p = 0; p < P; ++p) {
      const PiecesCase::Piece& x = pieces[static_cast<size_t>(p)];
      std::vector<Moved> moved;
      auto rows_of = [&](const Tensor& t, int64_t width) {
        float* full = const_cast<float*>(t.data<float>()) + (x.b * H * n + x.begin) * width;
        moved.push_back({full, tensor(H * x.len * width), width});
        float* copy = static_cast<float*>(moved.back().copy.raw());
        if (x.len > 0) copy_rows(ctx.stream, copy, x.len * width * 4, full, n * width * 4, x.len * width * 4, H, dev);
        return copy;
      };
      auto states_of = [&](const Tensor& t) { return const_cast<float*>(t.data<float>()) + p * H * ss; };
      f(c.shape(H, x.len), rows_of, states_of);
      for (const Moved& mv : moved)
        if (x.len > 0)
          copy_rows(ctx.stream, mv.full, n * mv.width * 4, static_cast<const float*>(mv.copy.raw()),
                    x.len * mv.width * 4, x.len * mv.width * 4, H, dev);
      synchronize(ctx.stream);
    }
  };
  if (c.causal) {
    step([&](const FavorShape& s, auto R, auto S) {
      ops.causal_forward_local(ctx, s, R(q, d), R(k, d), R(v, d), W.data<float>(), R(y, D1), R(rs, 1), S(T));
    });
    const Tensor prefix = rotated(T, 1);
    step([&](const FavorShape& s, auto R, auto S) {
      ops.add_prefix(ctx, s, R(q, d), W.data<float>(), S(prefix), R(y, D1), R(rs, 1));
    });
    linear_attention_normalize(ctx, c.shape(c.B() * H, n).lin(), y.data<float>(), o.data<float>(), den.data<float>());
    step([&](const FavorShape& s, auto R, auto S) {
      ops.causal_backward_local(ctx, s, R(q, d), R(k, d), R(v, d), W.data<float>(), R(o, d), R(den, 1), R(rs, 1),
                                R(g, d), S(prefix), R(dq, d), R(dk, d), R(dv, d), S(G), dWp);
    });
    const Tensor suffix = rotated(G, 2);
    step([&](const FavorShape& s, auto R, auto S) {
      ops.backward_add_suffix(ctx, s, R(k, d), R(v, d), W.data<float>(), S(suffix), R(dk, d), R(dv, d), dWp);
    });
  } else {
    step([&](const FavorShape& s, auto R, auto S) { ops.key_state(ctx, s, R(k, d), R(v, d), W.data<float>(), S(T)); });
    step([&](const FavorShape& s, auto R, auto S) {
      ops.bidirectional_forward_finish(ctx, s, R(q, d), W.data<float>(), S(T), R(y, D1), R(rs, 1));
    });
    linear_attention_normalize(ctx, c.shape(c.B() * H, n).lin(), y.data<float>(), o.data<float>(), den.data<float>());
    step([&](const FavorShape& s, auto R, auto S) {
      ops.bidirectional_backward_local(ctx, s, R(q, d), W.data<float>(), R(o, d), R(den, 1), R(rs, 1), R(g, d), S(T),
                                       R(dq, d), S(G), dWp);
    });
    step([&](const FavorShape& s, auto R, auto S) {
      ops.bidirectional_backward_finish(ctx, s, R(k, d), R(v, d), W.data<float>(), S(G), R(dk, d), R(dv, d), dWp);
    });
  }
  PiecesResult r;
  r.y = download(y, rows * D1);
  r.rs = download(rs, rows);
  r.o = download(o, rows * d);
  r.den = download(den, rows);
  r.total = download(T, heads * ss);
  r.dq = download(dq, rows * d);
  r.dk = download(dk, rows * d);
  r.dv = download(dv, rows * d);
  r.grad = download(G, heads * ss);
  r.dW = download(dW, H * c.m * d);
  return r;
}

// rel_l2 of two sets of packed states [heads][state_size] (log-scale
// first) as the states they stand for: each head of both taken to the larger
// of its two log-scales, so that one state kept at another log-scale (the
// CUDA kernels' feature slices merge theirs at the largest slice's) compares
// equal.
inline double state_rel_l2(const std::vector<float>& got, const std::vector<float>& want, int64_t state_size) {
  const size_t ss = static_cast<size_t>(state_size);
  double diff = 0, norm = 0;
  for (size_t h = 0; h < want.size() / ss; ++h) {
    const double a = got[h * ss], b = want[h * ss], top = std::max(a, b);
    const double wa = std::exp(a - top), wb = std::exp(b - top);
    for (size_t k = 1; k < ss; ++k) {
      const double x = wa * got[h * ss + k], y = wb * want[h * ss + k];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace test
}  // namespace pf
