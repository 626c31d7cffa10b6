// performer-bench approx: how well random-feature attention approximates exact
// softmax attention, one head of fixed Gaussian Q, K, V [n, d] (keyed), over a
// set of projection seeds, causal and bidirectional. Three sweeps:
//   features:  m in {16..512}, orthogonal vs iid W, positive (FAVOR+) vs trig features
//              (q, k scaled by --features-scale, 0.5)
//   scale:     q and k multiplied by s in {0.25 .. 2} (m = 256)
//   sharpness: a planted key k_{j*} = alpha q_{i*} (i* = n-1, j* = n/2) after
//              scaling q, k by --sharpness-scale (0.5), alpha varied (m = 256)
// Per setting (aggregated over seeds): relative L2 error of the normalised
// outputs against exact softmax attention (float64 reference), the error of the
// seed-averaged output (what remains of it is bias), the RMS output error in
// units of the RMS of V (meaningful when the exact output is near 0), the mean ratio of the
// estimated to the exact softmax denominator (1 for an unbiased kernel
// estimate), the fraction of queries whose most-attended key agrees with the
// exact one, whether the planted query picks j*, and time and peak workspace.
// The analysis path builds the n x n approximate weights A_ij = exp(c_k_j) phi_q_i.phi_k_j
// (dense, float) to read argmaxes and denominators; the time and memory of the
// positive features are those of the real kernel (favor_attention_forward, the
// O(n (d + m)) composite), of trig features those of the dense analysis path
// (trig features exist for analysis only), of "exact" those of the tiled CPU
// softmax kernel.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/favor_attention/favor_attention.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/gemm/gemm.h"
#include "kernels/random_features/random_features.h"
#include "kernels/softmax_attention/softmax_attention.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/timing.h"
#include "runtime/random.h"

namespace pf::bench {
namespace {

std::vector<float> approx_gaussian(int64_t size, uint64_t stream) {
  return keyed_normals<float>(size, 4242, stream, 0);
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct Setting {
  std::string study;
  bool causal = true;
  bool trig = false;
  ProjectionKind kind = ProjectionKind::Orthogonal;
  int64_t m = 256;
  double scale = 1.0;
  double alpha = 0.0;  // 0: nothing planted
};

// The inputs and exact answers of one (mode, scale, alpha).
struct Exact {
  std::vector<float> q, k, v;
  std::vector<double> out, lse;
  std::vector<int64_t> argmax;  // most-attended key of each query
};

struct Config {
  int64_t n, d, i_star, j_star;
};

Exact make_exact(const Config& c, bool causal, double scale, double alpha) {
  Exact e;
  e.q = approx_gaussian(c.n * c.d, 1);
  e.k = approx_gaussian(c.n * c.d, 2);
  e.v = approx_gaussian(c.n * c.d, 3);
  for (auto& x : e.q) x *= static_cast<float>(scale);
  for (auto& x : e.k) x *= static_cast<float>(scale);
  if (alpha > 0)
    for (int64_t t = 0; t < c.d; ++t) e.k[c.j_star * c.d + t] = static_cast<float>(alpha) * e.q[c.i_star * c.d + t];
  const std::vector<double> q(e.q.begin(), e.q.end()), k(e.k.begin(), e.k.end()), v(e.v.begin(), e.v.end());
  const SoftmaxAttentionParams p = softmax_attention_params(1, c.n, c.d, causal);
  e.out.resize(c.n * c.d);
  e.lse.resize(c.n);
  softmax_attention_forward_ref(p, q.data(), k.data(), v.data(), e.out.data(), e.lse.data());
  std::vector<double> s(c.n * c.n);
  gemm_f64_ref(false, true, c.n, c.n, c.d, 1.0, q.data(), c.d, k.data(), c.d, 0.0, s.data(), c.n);
  e.argmax.resize(c.n);
  for (int64_t i = 0; i < c.n; ++i) {
    const int64_t end = causal ? i + 1 : c.n;
    e.argmax[i] = std::max_element(s.begin() + i * c.n, s.begin() + i * c.n + end) - (s.begin() + i * c.n);
  }
  return e;
}

struct Approx {
  std::vector<double> out;
  double den_ratio = 0;  // mean over queries of estimated / exact denominator
  double top1 = 0;       // fraction of queries whose argmax agrees
  bool planted = false;  // the planted query's argmax is j*
};

// Features (positive or trig), then the dense weights A and the normalised output.
Approx approximate(const Config& c, const Setting& st, const Exact& e, const std::vector<float>& W,
                   MemoryTracker* tracker) {
  const ExecContext ctx;
  const int64_t n = c.n, d = c.d, mf = st.trig ? 2 * st.m : st.m;
  const double data_scale = std::pow(static_cast<double>(d), -0.25);
  const int64_t bytes = (2 * n * mf + 2 * n + n * n + n * d) * 4;
  if (tracker) tracker->reserve(bytes, "approx_dense");
  std::vector<float> pq(n * mf), pk(n * mf), cq(n), ck(n), A(n * n), num(n * d);
  if (st.trig) {
    trig_features_forward(ctx, data_scale, n, d, st.m, e.q.data(), W.data(), pq.data(), cq.data());
    trig_features_forward(ctx, data_scale, n, d, st.m, e.k.data(), W.data(), pk.data(), ck.data());
  } else {
    const FeatureMapParams fp = default_feature_params(FeatureKernel::Softmax, d);
    feature_map_forward(ctx, fp, n, d, st.m, e.q.data(), W.data(), pq.data(), cq.data());
    feature_map_forward(ctx, fp, n, d, st.m, e.k.data(), W.data(), pk.data(), ck.data());
  }
  gemm_f32(ctx, false, true, n, n, mf, 1.f, pq.data(), mf, pk.data(), mf, 0.f, A.data(), n);
  const double ck_max = *std::max_element(ck.begin(), ck.end());
  std::vector<double> ek(n);
  for (int64_t j = 0; j < n; ++j) ek[j] = std::exp(ck[j] - ck_max);
  Approx a;
  std::vector<double> den(n);
  int64_t agree = 0;
  for (int64_t i = 0; i < n; ++i) {
    float* row = A.data() + i * n;
    const int64_t end = st.causal ? i + 1 : n;
    double s = 0;
    int64_t best = 0;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = j < end ? static_cast<float>(row[j] * ek[j]) : 0.f;
      s += row[j];
      if (j < end && row[j] > row[best]) best = j;
    }
    den[i] = s;
    agree += best == e.argmax[i];
    if (i == c.i_star) a.planted = best == c.j_star;
    a.den_ratio += s * std::exp(cq[i] + ck_max - e.lse[i]) / n;
  }
  a.top1 = static_cast<double>(agree) / n;
  gemm_f32(ctx, false, false, n, d, n, 1.f, A.data(), n, e.v.data(), d, 0.f, num.data(), d);
  a.out.resize(n * d);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < d; ++t)
      a.out[i * d + t] = std::fabs(den[i]) > 1e-30 ? num[i * d + t] / den[i] : 0.0;
  if (tracker) tracker->release(bytes, "approx_dense");
  return a;
}

// Seconds and peak workspace bytes of one forward of the setting's kernel.
void time_setting(const Config& c, const Setting& st, const Exact& e, const std::vector<float>& W, int reps,
                  double* seconds, int64_t* peak) {
  MemoryTracker tracker(Device::cpu());
  ExecContext ctx;
  ctx.tracker = &tracker;
  if (st.trig) {
    *seconds = best_seconds([&] { approximate(c, st, e, W, &tracker); }, reps);
  } else {
    const FavorAttentionParams p = favor_attention_params(1, 1, c.n, c.d, st.m, st.causal, FeatureKernel::Softmax);
    std::vector<float> out(c.n * c.d), den(c.n), rs(c.n), total(favor_attention_total_floats(p));
    *seconds = best_seconds(
        [&] {
          favor_attention_forward(ctx, p, e.q.data(), e.k.data(), e.v.data(), W.data(), out.data(), den.data(),
                                  rs.data(), st.causal ? nullptr : total.data());
        },
        reps);
  }
  *peak = tracker.stats().peak_bytes;
}

}  // namespace

int run_approx(int argc, char** argv) {
  CLI::App app{"approximation error of random-feature attention against exact softmax attention"};
  int64_t n = 1024, d = 64, seeds = 10;
  int reps = 3;
  std::string csv;
  std::vector<int64_t> ms{16, 32, 64, 128, 256, 512};
  std::vector<double> scales{0.25, 0.5, 1.0, 1.5, 2.0}, alphas{0.5, 1.0, 1.5, 2.0, 3.0, 4.0};
  double features_scale = 0.5, sharp_scale = 0.5;
  app.add_option("-n", n, "positions")->capture_default_str()->check(pf::positive_number());
  app.add_option("-d", d, "head dim")->capture_default_str()->check(pf::positive_number());
  app.add_option("--seeds", seeds, "projection seeds per setting")->capture_default_str()->check(pf::positive_number());
  app.add_option("--features", ms, "feature counts m of the features sweep")->check(pf::positive_number());
  app.add_option("--scales", scales, "query/key norm scales of the scale sweep")->check(pf::positive_number());
  app.add_option("--alphas", alphas, "planted-key sharpness values")->check(pf::positive_number());
  app.add_option("--features-scale", features_scale, "q, k norm scale of the features sweep")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--sharpness-scale", sharp_scale, "q, k norm scale of the sharpness sweep")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions (best is kept)")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--csv", csv, "write the CSV here instead of stdout");
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  CsvOutput csv_out(csv,
                    "study,mode,features,projection,m,scale,alpha,seeds,rel_err_mean,rel_err_std,rel_err_of_seed_mean,"
                    "rms_err_over_rms_v,den_ratio_mean,top1_all,planted_top1,exact_planted_top1,time_ms,timed,"
                    "peak_workspace_bytes\n");
  FILE* out = csv_out.file();
  const Config c{n, d, n - 1, n / 2};

  std::vector<Setting> settings;
  for (bool causal : {false, true}) {
    for (int64_t m : ms)
      for (bool trig : {false, true})
        for (ProjectionKind kind : {ProjectionKind::Orthogonal, ProjectionKind::Iid})
          settings.push_back({"features", causal, trig, kind, m, features_scale, 0.0});
    for (double s : scales)
      for (bool trig : {false, true})
        for (ProjectionKind kind : {ProjectionKind::Orthogonal, ProjectionKind::Iid})
          settings.push_back({"scale", causal, trig, kind, 256, s, 0.0});
    for (double a : alphas)
      for (bool trig : {false, true}) settings.push_back({"sharpness", causal, trig, ProjectionKind::Orthogonal, 256, sharp_scale, a});
  }

  // Exact answers are shared by all settings of one (mode, scale, alpha); the
  // settings are ordered so that consecutive ones share them.
  Exact exact;
  std::string exact_key;
  for (const Setting& st : settings) {
    const std::string key = std::to_string(st.causal) + "/" + std::to_string(st.scale) + "/" + std::to_string(st.alpha);
    const char* mode = st.causal ? "causal" : "bidirectional";
    if (key != exact_key) {
      exact = make_exact(c, st.causal, st.scale, st.alpha);
      exact_key = key;
      // The exact kernel's own row: time and workspace of the tiled CPU softmax.
      MemoryTracker tracker(Device::cpu());
      ExecContext host;  // a synchronous CPU stream: the kernel runs inside the timed call
      host.tracker = &tracker;
      const SoftmaxAttentionParams p = softmax_attention_params(1, n, d, st.causal);
      std::vector<float> o(n * d), lse(n);
      const double t = best_seconds(
          [&] { softmax_attention_forward(host, p, exact.q.data(), exact.k.data(), exact.v.data(), o.data(), lse.data()); },
          reps);
      const bool planted = st.alpha > 0;
      std::fprintf(out, "%s,%s,exact,none,0,%g,%g,1,0,0,0,0,1,1,%s,%s,%.3f,softmax_attention_forward_cpu,%ld\n",
                   st.study.c_str(), mode, st.scale, st.alpha, planted ? "1" : "",
                   planted ? (exact.argmax[c.i_star] == c.j_star ? "1" : "0") : "", t * 1e3,
                   static_cast<long>(tracker.stats().peak_bytes));
    }
    std::vector<double> errs, mean_out(n * d, 0.0);
    double v2 = 0, abs_err = 0;
    for (float x : exact.v) v2 += static_cast<double>(x) * x;
    double den_ratio = 0, top1 = 0, planted = 0;
    std::vector<float> W0;
    for (int64_t s = 0; s < seeds; ++s) {
      const std::vector<float> W =
          random_projection_f32({st.m, d, st.kind, FeatureScaling::ChiNorms}, {static_cast<uint64_t>(1000 + s), 0, 0});
      if (s == 0) W0 = W;
      const Approx a = approximate(c, st, exact, W, nullptr);
      errs.push_back(rel_l2(a.out, exact.out));
      double e2 = 0;
      for (int64_t i = 0; i < n * d; ++i) e2 += (a.out[i] - exact.out[i]) * (a.out[i] - exact.out[i]);
      abs_err += std::sqrt(e2 / v2) / seeds;
      for (int64_t i = 0; i < n * d; ++i) mean_out[i] += a.out[i] / seeds;
      den_ratio += a.den_ratio / seeds;
      top1 += a.top1 / seeds;
      planted += (a.planted ? 1.0 : 0.0) / seeds;
    }
    double mean = 0, var = 0;
    for (double x : errs) mean += x / seeds;
    for (double x : errs) var += (x - mean) * (x - mean) / std::max<int64_t>(seeds - 1, 1);
    double t = 0;
    int64_t peak = 0;
    time_setting(c, st, exact, W0, reps, &t, &peak);
    std::string planted_s = st.alpha > 0 ? std::to_string(planted) : "";
    std::string exact_planted = st.alpha > 0 ? (exact.argmax[c.i_star] == c.j_star ? "1" : "0") : "";
    std::fprintf(out, "%s,%s,%s,%s,%ld,%g,%g,%ld,%.5g,%.5g,%.5g,%.5g,%.5g,%.4f,%s,%s,%.3f,%s,%ld\n", st.study.c_str(), mode,
                 st.trig ? "trig" : "positive", st.kind == ProjectionKind::Orthogonal ? "orthogonal" : "iid",
                 static_cast<long>(st.m), st.scale, st.alpha, static_cast<long>(seeds), mean, std::sqrt(var),
                 rel_l2(mean_out, exact.out), abs_err, den_ratio, top1, planted_s.c_str(), exact_planted.c_str(), t * 1e3,
                 st.trig ? "dense_analysis" : "favor_attention_forward", static_cast<long>(peak));
    std::fflush(out);
    std::fprintf(stderr, "approx: %s %s %s m=%ld s=%g alpha=%g err=%.4f\n", st.study.c_str(), mode,
                 st.trig ? "trig" : "positive", static_cast<long>(st.m), st.scale, st.alpha, mean);
  }
  csv_out.commit();
  return 0;
}

}  // namespace pf::bench
