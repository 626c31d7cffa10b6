// performer-attn: one attention layer (no projections) on tensors from an HDF5
// file, forward and optionally backward, for checking and inspecting kernels.
//   performer-attn --input IN.h5 --output OUT.h5 --kernel favor|relu|elu|softmax
//                  --mode causal|bidirectional [--features M] [--seed S]
//                  [--chunk C] [--backend cpu|cuda]
// IN.h5:  float32 q, k, v [B, H, N, D]; optional w [M, D] (favor/relu/elu; else
//         drawn from --seed: random_projection_f32, layer 0, redraw 0, orthogonal,
//         chi norms, M = --features; elu: the identity [D, D], as the model runs
//         it); optional dout [B, H, N, D].
// OUT.h5: out [B, H, N, D]; w [M, D] (favor/relu/elu); with dout also dq, dk, dv
//         [B, H, N, D]; attributes kernel, mode. Written under OUT.h5.tmp-<pid>
//         and renamed, so OUT.h5 is either absent or complete.
// Errors (missing or non-HDF5 file, missing dataset, wrong shape) print one line
// "performer-attn: error: ..." naming the file, the dataset and the shapes, and
// exit with status 1. An --output that is the --input file (by any spelling or
// link) would replace the input: refused before anything is read, with one
// such line naming both and exit status 2.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/h5.h"
#include "data/output_path.h"
#include "data/replaceable_output.h"
#include "kernels/favor_attention/favor_attention.h"
#include "kernels/random_features/random_features.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "runtime/exec.h"
#include "runtime/memory.h"

namespace {

struct Options {
  std::string input, output, kernel = "favor", mode = "causal", backend = "cpu";
  int64_t features = 256, chunk = 64;
  uint64_t seed = 0;
};

// A user-facing error: its text is printed as is.
class ToolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

// The shape of a dataset, read before its values: shapes are compared before
// anything of their size is allocated.
std::vector<int64_t> dataset_shape(hid_t file, const std::string& path, const std::string& name) {
  if (!pf::h5_exists(file, name)) throw ToolError(path + ": missing dataset '" + name + "'");
  return pf::h5_dataset_shape(pf::H5Id(pf::h5_open_dataset(file, name)).get());
}

std::vector<float> read_dataset(hid_t file, const std::string& name) { return pf::h5_read_array<float>(file, name); }

// Copies host data to `device` (a plain copy on the CPU), recorded in `tracker`.
class DeviceBuffer {
 public:
  DeviceBuffer(pf::MemoryTracker& tracker, pf::Device device, int64_t count, const float* host = nullptr)
      : tracker_(tracker), device_(device), bytes_(count * static_cast<int64_t>(sizeof(float))) {
    ptr_ = static_cast<float*>(pf::device_allocate(tracker_, bytes_ > 0 ? bytes_ : 4, "performer-attn"));
    if (host != nullptr && bytes_ > 0) pf::copy_bytes_blocking(ptr_, device_, host, pf::Device::cpu(), bytes_);
  }
  ~DeviceBuffer() { pf::device_free(tracker_, ptr_, bytes_ > 0 ? bytes_ : 4, "performer-attn"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() const { return ptr_; }
  std::vector<float> to_host() const {
    std::vector<float> out(static_cast<size_t>(bytes_ / sizeof(float)));
    if (bytes_ > 0) pf::copy_bytes_blocking(out.data(), pf::Device::cpu(), ptr_, device_, bytes_);
    return out;
  }

 private:
  pf::MemoryTracker& tracker_;
  pf::Device device_;
  int64_t bytes_;
  float* ptr_ = nullptr;
};

struct Outputs {
  std::vector<float> out, w, dq, dk, dv;
};

int run(const Options& opt, pf::ReplaceableOutput& output) {
  const bool causal = opt.mode == "causal";
  const bool softmax = opt.kernel == "softmax";
  const pf::Device device = opt.backend == "cuda" ? pf::Device::cuda(0) : pf::Device::cpu();
  if (device.is_cuda() && pf::cuda_device_count() == 0)
    throw ToolError("--backend cuda: " + pf::cuda_unavailable_reason());

  // ---- read and check the input -------------------------------------------------
  pf::H5Id file = pf::h5_open_file(opt.input);
  const std::vector<int64_t> qs = dataset_shape(file, opt.input, "q"), ks = dataset_shape(file, opt.input, "k"),
                             vs = dataset_shape(file, opt.input, "v");
  std::vector<int64_t> ws, gs;
  if (qs.size() != 4)
    throw ToolError(opt.input + ": dataset 'q' must be [B, H, N, D], got shape " + shape_str(qs));
  if (ks != qs || vs != qs)
    throw ToolError(opt.input + ": datasets 'q', 'k', 'v' must have one shape, got q " + shape_str(qs) + ", k " +
                    shape_str(ks) + ", v " + shape_str(vs));
  const int64_t B = qs[0], H = qs[1], N = qs[2], D = qs[3], size = B * H * N * D;
  if (D < 1) throw ToolError(opt.input + ": dataset 'q' has head dim D = 0, shape " + shape_str(qs));
  const bool with_backward = pf::h5_exists(file, "dout");
  std::vector<float> dout;
  if (with_backward) {
    gs = dataset_shape(file, opt.input, "dout");
    if (gs != qs)
      throw ToolError(opt.input + ": dataset 'dout' must have the shape of 'q' " + shape_str(qs) + ", got " +
                      shape_str(gs));
    dout = read_dataset(file, "dout");
  }
  const std::vector<float> q = read_dataset(file, "q"), k = read_dataset(file, "k"), v = read_dataset(file, "v");
  Outputs res;
  if (!softmax) {
    if (pf::h5_exists(file, "w")) {
      ws = dataset_shape(file, opt.input, "w");
      if (ws.size() != 2 || ws[1] != D || ws[0] < 1)
        throw ToolError(opt.input + ": dataset 'w' must be [M, D] with D = " + std::to_string(D) +
                        " (the last dim of 'q' " + shape_str(qs) + "), got shape " + shape_str(ws));
      res.w = read_dataset(file, "w");
    } else if (opt.kernel == "elu") {
      res.w.assign(static_cast<size_t>(D * D), 0.f);
      for (int64_t j = 0; j < D; ++j) res.w[static_cast<size_t>(j * D + j)] = 1.f;
      ws = {D, D};
    } else {
      if (opt.features < 1) throw ToolError("--features must be >= 1, got " + std::to_string(opt.features));
      res.w = pf::random_projection_f32({opt.features, D, pf::ProjectionKind::Orthogonal, pf::FeatureScaling::ChiNorms},
                                        {opt.seed, 0, 0});
      ws = {opt.features, D};
    }
  }
  file.close();

  // ---- compute ------------------------------------------------------------------
  pf::MemoryTracker tracker(device);
  pf::ExecResources resources(device, tracker);
  const pf::ExecContext& ctx = resources.ctx();
  DeviceBuffer dq_(tracker, device, size), dk_(tracker, device, size), dv_(tracker, device, size);
  DeviceBuffer q_(tracker, device, size, q.data()), k_(tracker, device, size, k.data()),
      v_(tracker, device, size, v.data()), o_(tracker, device, size);
  DeviceBuffer g_(tracker, device, with_backward ? size : 0, with_backward ? dout.data() : nullptr);
  if (softmax) {
    const pf::SoftmaxAttentionParams p = pf::softmax_attention_params(B * H, N, D, causal);
    DeviceBuffer lse(tracker, device, B * H * N);
    pf::softmax_attention_forward(ctx, p, q_.get(), k_.get(), v_.get(), o_.get(), lse.get());
    if (with_backward)
      pf::softmax_attention_backward(ctx, p, q_.get(), k_.get(), v_.get(), o_.get(), lse.get(), g_.get(), dq_.get(),
                                     dk_.get(), dv_.get());
  } else {
    const pf::FeatureKernel fk = opt.kernel == "relu"  ? pf::FeatureKernel::Relu
                                 : opt.kernel == "elu" ? pf::FeatureKernel::Elu
                                                       : pf::FeatureKernel::Softmax;
    const pf::FavorAttentionParams p = pf::favor_attention_params(B, H, N, D, ws[0], causal, fk, opt.chunk);
    DeviceBuffer w_(tracker, device, ws[0] * D, res.w.data());
    DeviceBuffer den(tracker, device, B * H * N), row_scale(tracker, device, B * H * N);
    DeviceBuffer total(tracker, device, pf::favor_attention_total_floats(p));
    float* total_ptr = causal ? nullptr : total.get();
    pf::favor_attention_forward(ctx, p, q_.get(), k_.get(), v_.get(), w_.get(), o_.get(), den.get(), row_scale.get(),
                                total_ptr);
    if (with_backward)
      pf::favor_attention_backward(ctx, p, q_.get(), k_.get(), v_.get(), w_.get(), o_.get(), den.get(),
                                   row_scale.get(), total_ptr, g_.get(), dq_.get(), dk_.get(), dv_.get());
  }
  pf::synchronize(ctx.stream);
  res.out = o_.to_host();
  if (with_backward) {
    res.dq = dq_.to_host();
    res.dk = dk_.to_host();
    res.dv = dv_.to_host();
  }

  // ---- write under a temporary name, then rename ----------------------------------
  auto write = [&](const std::string& tmp) {
    pf::H5Id out = pf::h5_create_file(tmp);
    pf::h5_write_array(out, "out", res.out.data(), qs);
    if (!softmax) pf::h5_write_array(out, "w", res.w.data(), ws);
    if (with_backward) {
      pf::h5_write_array(out, "dq", res.dq.data(), qs);
      pf::h5_write_array(out, "dk", res.dk.data(), qs);
      pf::h5_write_array(out, "dv", res.dv.data(), qs);
    }
    pf::h5_write_attr_string(out, "kernel", opt.kernel);
    pf::h5_write_attr_string(out, "mode", opt.mode);
    out.close();
  };
  output.write(write);
  std::fprintf(stderr, "performer-attn: %s %s B=%ld H=%ld N=%ld D=%ld%s -> %s\n", opt.kernel.c_str(),
               opt.mode.c_str(), static_cast<long>(B), static_cast<long>(H), static_cast<long>(N),
               static_cast<long>(D), with_backward ? " (forward + backward)" : " (forward)", opt.output.c_str());
  return 0;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"performer-attn: one attention layer (FAVOR+, relu, elu + 1 or exact softmax) on tensors from HDF5"};
  Options opt;
  app.add_option("--input", opt.input, "input HDF5 file with q, k, v [B, H, N, D], optional w [M, D], dout")
      ->required();
  app.add_option("--output", opt.output, "output HDF5 file (out, w, and dq, dk, dv with dout)")->required();
  app.add_option("--kernel", opt.kernel, "attention kernel")
      ->check(CLI::IsMember({"favor", "relu", "elu", "softmax"}))
      ->capture_default_str();
  app.add_option("--mode", opt.mode, "attention mask")
      ->check(CLI::IsMember({"causal", "bidirectional"}))
      ->capture_default_str();
  app.add_option("--features", opt.features, "random features M when the input has no w")->capture_default_str();
  app.add_option("--seed", opt.seed, "seed of the generated w")->capture_default_str();
  app.add_option("--chunk", opt.chunk, "chunk of the causal linear attention")->capture_default_str();
  app.add_option("--backend", opt.backend, "where to compute")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "performer-attn: error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  std::optional<pf::ReplaceableOutput> output;
  try {
    output.emplace("--output", opt.output,
                   pf::OutputKind{"an output file of performer-attn",
                                  [](const std::string& p) {
                                    return pf::h5_root_has_attributes(p, {"kernel", "mode"});
                                  }},
                   std::vector<std::string>{opt.input});
  } catch (const pf::ConfigError& e) {
    std::fprintf(stderr, "performer-attn: error: %s\n", one_line(e.what()).c_str());
    return 2;
  }
  try {
    return run(opt, *output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "performer-attn: error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}
