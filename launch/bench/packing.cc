// performer-bench packing: the useful fraction of samples (residues and <end>
// tokens over all the samples' tokens, the rest padding or unused) of a
// prepared file's split under each data layout, at each sample length L:
//   single   one protein per sample, padded to L (cropped above L)
//   concat   the stream of proteins cut every L tokens (no padding; the tail
//            shorter than L is unused, and attention crosses proteins)
//   packed   whole proteins per sample by data/packing.h (first fit over a
//            window of open samples), cropped above L as in single
//   performer-bench packing --data FILE.h5 [--split train] [--lengths L ...] [--window W] [--csv FILE]
// The plan is the packed data mode's layout; the mode itself is not built yet.
#include "data/packing.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "data/protein_shards.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"
#include "launch/bench/timing.h"
#include "runtime/check.h"

namespace pf::bench {

int run_packing(int argc, char** argv) {
  CLI::App app{"useful fraction of samples under the single, concat and packed layouts"};
  std::string data, split = "train", csv;
  std::vector<int64_t> lengths{2048, 8192, 65536};
  int64_t window = 64;
  uint64_t seed = 1;
  app.add_option("--data", data, "prepared HDF5 file (performer-data prepare)")->required();
  app.add_option("--split", split, "train, valid, test or ood")->capture_default_str();
  app.add_option("--lengths", lengths, "sample lengths L")->check(pf::positive_number());
  app.add_option("--window", window, "open samples of the packing's first fit")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--seed", seed, "data.seed (the packing order; epoch 0)")->capture_default_str();
  app.add_option("--csv", csv, "write the CSV here instead of stdout");
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2

  ProteinShards shards({data}, split);
  std::vector<int64_t> tokens(static_cast<size_t>(shards.num_proteins()));
  int64_t longest = 0;
  for (int64_t p = 0; p < shards.num_proteins(); ++p) {
    tokens[p] = shards.locate(p).length + 1;
    longest = std::max(longest, tokens[p]);
  }
  CsvOutput csv_out(csv, "split,proteins,tokens,longest,L,mode,samples,useful_tokens,useful_fraction,plan_s\n");
  std::FILE* out = csv_out.file();
  auto row = [&](int64_t L, const char* mode, int64_t samples, int64_t useful, double seconds) {
    std::fprintf(out, "%s,%lld,%lld,%lld,%lld,%s,%lld,%lld,%.4f,%.3f\n", split.c_str(),
                 static_cast<long long>(tokens.size()), static_cast<long long>(shards.stream_length()),
                 static_cast<long long>(longest), static_cast<long long>(L), mode, static_cast<long long>(samples),
                 static_cast<long long>(useful),
                 samples > 0 ? static_cast<double>(useful) / (static_cast<double>(samples) * L) : 0.0, seconds);
    std::fflush(out);
  };
  for (int64_t L : lengths) {
    PF_REQUIRE(ConfigError, L >= 1, "packing: --lengths must be positive, got " << L);
    int64_t single_useful = 0;
    for (int64_t t : tokens) single_useful += std::min(t, L);
    row(L, "single", static_cast<int64_t>(tokens.size()), single_useful, 0);
    const int64_t concat_samples = shards.stream_length() / L;
    row(L, "concat", concat_samples, concat_samples * L, 0);
    const double t0 = seconds_now();
    const PackingPlan plan = plan_packing(tokens, L, seed, 0, window);
    row(L, "packed", static_cast<int64_t>(plan.samples.size()), plan.useful_tokens, seconds_now() - t0);
  }
  csv_out.commit();
  return 0;
}

}  // namespace pf::bench
