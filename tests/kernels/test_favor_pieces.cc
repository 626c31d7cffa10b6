// The FAVOR+ protocol over pieces (FavorPieces, the packed samples of
// model/attention_packed.cc) on the CPU: one call over all pieces gives, bit
// for bit, what the same steps give piece by piece on contiguous copies of
// each piece's rows (tests/kernels/favor_pieces_driver.h), for the fused CPU
// kernels and the composition in slabs, causal and bidirectional, FAVOR+,
// relu and exp (whose dW adds per head in piece order both ways). Pieces of
// 1 row, of less than a chunk and of several chunks; samples of one piece.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/exec.h"
#include "tests/kernels/favor_pieces_driver.h"
#include "tests/kernels/favor_protocol_driver.h"

namespace pf {
namespace {

std::vector<std::vector<int64_t>> layout() { return {{1, 70, 79}, {150}, {3, 64, 83}}; }

void expect_same(const test::PiecesResult& a, const test::PiecesResult& b, bool exp) {
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.rs, b.rs);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.den, b.den);
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
  EXPECT_EQ(a.grad, b.grad);
  EXPECT_EQ(a.dW, b.dW);
  if (exp) {
    bool moved = false;
    for (float x : a.dW) moved = moved || x != 0.f;
    EXPECT_TRUE(moved) << "exp's dW stayed zero";
  }
}

TEST(FavorPieces, OneCallEqualsPieceByPiece) {
  uint64_t seed = 9100;
  for (int64_t slab_rows : {int64_t{0}, int64_t{16}})
    for (bool causal : {true, false})
      for (FeatureKernel kernel : {FeatureKernel::Softmax, FeatureKernel::Relu, FeatureKernel::Exp}) {
        SCOPED_TRACE(std::string("slab_rows=") + std::to_string(slab_rows) + " causal=" + std::to_string(causal) +
                     " kernel=" + feature_kernel_name(kernel));
        test::PiecesCase c(2, 150, 8, 16, causal, kernel, layout(), ++seed);
        c.slab_rows = slab_rows;
        MemoryTracker tracker(Device::cpu());
        const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
        const test::DispatchedFavorOps ops;
        const test::PiecesResult one = test::run_pieces(ops, res.ctx(), c, true);
        const test::PiecesResult each = test::run_pieces(ops, res.ctx(), c, false);
        expect_same(one, each, kernel == FeatureKernel::Exp);
      }
}

TEST(FavorPieces, TableErrorsNameThePiece) {
  MemoryTracker tracker(Device::cpu());
  const ExecResources res(Device::cpu(), tracker, HostStreamConfig{});
  try {
    const FavorPieces bad(res.ctx(), {{0, 4, 0}, {4, -1, 0}});
    FAIL() << "a negative length was taken";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("piece 1"), std::string::npos) << e.what();
  }
  const FavorPieces table(res.ctx(), {{0, 4, 0}, {4, 6, 1}});
  EXPECT_EQ(table.longest(), 6);
  EXPECT_EQ(table.slots(), 2);
  FavorShape s = favor_pieces_shape(FavorShape{}, table);
  s.d = 4;
  s.m = 4;
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.n, 6);
  s.n = 5;
  try {
    favor_check(s, "test");
    FAIL() << "a shape that disagrees with its pieces was taken";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("n=6"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pf
