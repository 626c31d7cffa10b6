// performer-attn end to end: writes q, k, v (and w, dout) with the HDF5
// helpers, runs the executable, and compares its out (and dq, dk, dv) with the
// float64 references of exact softmax attention and of the FAVOR+ composite
// (causal and bidirectional, given and generated w); then every error case
// (missing file, non-HDF5 file, missing dataset, mismatched q/k/v, w with the
// wrong number of columns, dout of the wrong shape, bad option) must exit with
// status 1 and one line "performer-attn: error: ..." naming the dataset; an
// output that is the input exits with status 2 and leaves the input alone.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "data/h5.h"
#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "tests/support/numerics.h"

namespace pf {
namespace {

constexpr int64_t B = 2, H = 2, N = 33, D = 8, M = 24;

struct ToolRun {
  int status = -1;
  std::string err;
};

class AttnTool : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "attn_tool_" + std::to_string(static_cast<long>(::getpid())) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  ToolRun run(const std::string& args) const {
    const std::string err = path("stderr.txt");
    const std::string cmd = std::string(PF_ATTN_TOOL) + " " + args + " 2> '" + err + "'";
    ToolRun r;
    const int raw = std::system(cmd.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    return r;
  }

  std::string dir_;
};

std::vector<float> normal_f32(int64_t count, uint64_t stream) {
  return test::cast_vector<float>(test::normal_vector(count, 77, stream));
}

struct Input {
  std::vector<float> q, k, v, dout;
};

Input write_input(const std::string& file, bool with_dout, const std::vector<float>* w) {
  const int64_t size = B * H * N * D;
  Input in{normal_f32(size, 1), normal_f32(size, 2), normal_f32(size, 3), normal_f32(size, 4)};
  H5Id f = h5_create_file(file);
  h5_write_array(f, "q", in.q.data(), {B, H, N, D});
  h5_write_array(f, "k", in.k.data(), {B, H, N, D});
  h5_write_array(f, "v", in.v.data(), {B, H, N, D});
  if (with_dout) h5_write_array(f, "dout", in.dout.data(), {B, H, N, D});
  if (w) h5_write_array(f, "w", w->data(), {static_cast<int64_t>(w->size()) / D, D});
  f.close();
  return in;
}

std::vector<double> to_f64(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

TEST_F(AttnTool, SoftmaxMatchesReference) {
  for (bool causal : {true, false}) {
    const Input in = write_input(path("in.h5"), true, nullptr);
    const ToolRun r = run("--input " + path("in.h5") + " --output " + path("out.h5") +
                          " --kernel softmax --mode " + (causal ? "causal" : "bidirectional"));
    ASSERT_EQ(r.status, 0) << r.err;
    const SoftmaxAttentionParams p = softmax_attention_params(B * H, N, D, causal);
    const int64_t size = B * H * N * D;
    std::vector<double> o(size), lse(B * H * N), dq(size), dk(size), dv(size);
    const auto q = to_f64(in.q), k = to_f64(in.k), v = to_f64(in.v), g = to_f64(in.dout);
    softmax_attention_forward_ref(p, q.data(), k.data(), v.data(), o.data(), lse.data());
    softmax_attention_backward_ref(p, q.data(), k.data(), v.data(), g.data(), dq.data(), dk.data(), dv.data());
    H5Id f = h5_open_file(path("out.h5"));
    std::vector<int64_t> shape;
    EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "out", &shape), o), 1e-5);
    EXPECT_EQ(shape, (std::vector<int64_t>{B, H, N, D}));
    EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "dq"), dq), 1e-5);
    EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "dk"), dk), 1e-5);
    EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "dv"), dv), 1e-5);
    EXPECT_FALSE(h5_exists(f, "w"));
  }
}

TEST_F(AttnTool, FavorMatchesReference) {
  const std::vector<float> given =
      random_projection_f32({M, D, ProjectionKind::Iid, FeatureScaling::ChiNorms}, {5, 0, 0});
  for (bool causal : {true, false}) {
    for (bool w_in_file : {true, false}) {
      SCOPED_TRACE(testing::Message() << "causal=" << causal << " w_in_file=" << w_in_file);
      const Input in = write_input(path("in.h5"), true, w_in_file ? &given : nullptr);
      const ToolRun r = run("--input " + path("in.h5") + " --output " + path("out.h5") +
                            " --kernel favor --features " + std::to_string(M) + " --seed 11 --chunk 5 --mode " +
                            (causal ? "causal" : "bidirectional"));
      ASSERT_EQ(r.status, 0) << r.err;
      const std::vector<float> w =
          w_in_file ? given
                    : random_projection_f32({M, D, ProjectionKind::Orthogonal, FeatureScaling::ChiNorms}, {11, 0, 0});
      const FavorAttentionParams p = favor_attention_params(B, H, N, D, M, causal, FeatureKernel::Softmax, 5);
      const int64_t size = B * H * N * D;
      std::vector<double> o(size), dq(size), dk(size), dv(size);
      const auto q = to_f64(in.q), k = to_f64(in.k), v = to_f64(in.v), g = to_f64(in.dout), wd = to_f64(w);
      favor_attention_forward_ref(p, q.data(), k.data(), v.data(), wd.data(), o.data());
      favor_attention_backward_ref(p, q.data(), k.data(), v.data(), wd.data(), g.data(), dq.data(), dk.data(),
                                   dv.data());
      H5Id f = h5_open_file(path("out.h5"));
      EXPECT_EQ(h5_read_array<float>(f, "w"), w);
      EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "out"), o), 1e-5);
      EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "dq"), dq), 1e-5);
      EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "dk"), dk), 1e-5);
      EXPECT_LE(test::rel_l2(h5_read_array<float>(f, "dv"), dv), 1e-5);
    }
  }
}

TEST_F(AttnTool, ForwardOnlyWritesNoGradients) {
  write_input(path("in.h5"), false, nullptr);
  const ToolRun r = run("--input " + path("in.h5") + " --output " + path("out.h5") + " --kernel relu --mode causal");
  ASSERT_EQ(r.status, 0) << r.err;
  H5Id f = h5_open_file(path("out.h5"));
  EXPECT_TRUE(h5_exists(f, "out"));
  EXPECT_TRUE(h5_exists(f, "w"));
  EXPECT_FALSE(h5_exists(f, "dq"));
}

// Runs the tool on `in` and expects exit status 1, one error line, and every
// string of `want` in it; and no output file.
void expect_failure(const AttnTool& t, const ToolRun& r, const std::vector<std::string>& want) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.rfind("performer-attn: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  for (const auto& s : want) EXPECT_NE(r.err.find(s), std::string::npos) << "'" << s << "' not in: " << r.err;
  (void)t;
}

TEST_F(AttnTool, ErrorsNameTheFileDatasetAndShapes) {
  const std::string in = path("in.h5"), out = path("out.h5");
  const std::string args = " --output " + out + " --kernel favor --mode causal";
  const int64_t size = B * H * N * D;
  const std::vector<float> x = normal_f32(size, 1), shorter = normal_f32(B * H * (N - 1) * D, 2);

  expect_failure(*this, run("--input " + path("absent.h5") + args), {"absent.h5"});
  {
    std::ofstream(path("text.h5")) << "not an HDF5 file\n";
    expect_failure(*this, run("--input " + path("text.h5") + args), {"text.h5"});
  }
  {  // missing v
    H5Id f = h5_create_file(in);
    h5_write_array(f, "q", x.data(), {B, H, N, D});
    h5_write_array(f, "k", x.data(), {B, H, N, D});
    f.close();
    expect_failure(*this, run("--input " + in + args), {"in.h5", "'v'"});
  }
  {  // k shorter than q
    H5Id f = h5_create_file(in);
    h5_write_array(f, "q", x.data(), {B, H, N, D});
    h5_write_array(f, "k", shorter.data(), {B, H, N - 1, D});
    h5_write_array(f, "v", x.data(), {B, H, N, D});
    f.close();
    expect_failure(*this, run("--input " + in + args), {"in.h5", "'k'", "[2, 2, 32, 8]", "[2, 2, 33, 8]"});
  }
  {  // k declared at 2^40 values (never written): its shape is compared before anything is read
    H5Id f = h5_create_file(in);
    h5_write_array(f, "q", x.data(), {B, H, N, D});
    const hsize_t dims[4] = {1, 1, hsize_t{1} << 37, 8}, chunk[4] = {1, 1, 1 << 16, 8};
    H5Id space(H5Screate_simple(4, dims, nullptr));
    H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl, 4, chunk);
    H5Id k(H5Dcreate2(f, "k", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    h5_write_array(f, "v", x.data(), {B, H, N, D});
    k.close();
    f.close();
    expect_failure(*this, run("--input " + in + args), {"in.h5", "must have one shape", "[1, 1, 137438953472, 8]"});
  }
  {  // w with D - 1 columns
    const std::vector<float> w(M * (D - 1), 0.5f);
    H5Id f = h5_create_file(in);
    h5_write_array(f, "q", x.data(), {B, H, N, D});
    h5_write_array(f, "k", x.data(), {B, H, N, D});
    h5_write_array(f, "v", x.data(), {B, H, N, D});
    h5_write_array(f, "w", w.data(), {M, D - 1});
    f.close();
    expect_failure(*this, run("--input " + in + args), {"in.h5", "'w'", "[24, 7]"});
  }
  {  // dout of the wrong shape
    H5Id f = h5_create_file(in);
    h5_write_array(f, "q", x.data(), {B, H, N, D});
    h5_write_array(f, "k", x.data(), {B, H, N, D});
    h5_write_array(f, "v", x.data(), {B, H, N, D});
    h5_write_array(f, "dout", shorter.data(), {B, H, N - 1, D});
    f.close();
    expect_failure(*this, run("--input " + in + args), {"in.h5", "'dout'", "[2, 2, 32, 8]"});
  }
  {  // q not 4-d
    H5Id f = h5_create_file(in);
    h5_write_array(f, "q", x.data(), {B * H, N, D});
    h5_write_array(f, "k", x.data(), {B * H, N, D});
    h5_write_array(f, "v", x.data(), {B * H, N, D});
    f.close();
    expect_failure(*this, run("--input " + in + args), {"in.h5", "'q'", "[4, 33, 8]"});
  }
  expect_failure(*this, run("--input " + in + " --output " + out + " --kernel cosine"), {"--kernel"});
  std::ifstream probe(out);
  EXPECT_FALSE(probe.good()) << "an output file was left behind by a failed run";
}

// An output that is the input (the same path, another spelling, a symbolic
// or a hard link) would replace the input: refused with status 2, one line
// naming both, and the input left as it was.
TEST_F(AttnTool, OutputThatIsTheInputIsRefusedWithStatus2) {
  const std::string in = path("in.h5");
  write_input(in, false, nullptr);
  std::ifstream f0(in, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(f0)), std::istreambuf_iterator<char>());
  ASSERT_EQ(::symlink(in.c_str(), path("link.h5").c_str()), 0);
  ASSERT_EQ(::link(in.c_str(), path("hard.h5").c_str()), 0);
  for (const std::string& out : {in, dir_ + "/./in.h5", path("link.h5"), path("hard.h5")}) {
    SCOPED_TRACE(out);
    const ToolRun r = run("--input " + in + " --output " + out + " --kernel relu --mode causal");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err.rfind("performer-attn: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_NE(r.err.find("--output '" + out + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the input '" + in + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
    std::ifstream f1(in, std::ios::binary);
    const std::string after((std::istreambuf_iterator<char>(f1)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(after == before) << "the input was rewritten";
  }
  // The input named through the link, the output directly: the same file too.
  const ToolRun r = run("--input " + path("link.h5") + " --output " + in + " --kernel relu --mode causal");
  EXPECT_EQ(r.status, 2) << r.err;
}

}  // namespace
}  // namespace pf
