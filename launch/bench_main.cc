// performer-bench: benchmarks of the trainer's parts.
//   performer-bench <subcommand> [options]     (performer-bench <subcommand> --help)
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "launch/bench/bench.h"
#include "runtime/errors.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int, char**);
  const char* what;
};

const Subcommand kSubcommands[] = {
    {"gemm", pf::bench::run_gemm, "CPU sgemm GFLOP/s per backend (the peak other figures are measured against)"},
    {"posops", pf::bench::run_posops, "CPU position-wise ops (layer norm, linear, GELU, embedding, loss, AdamW)"},
    {"feature_map", pf::bench::run_feature_map, "CPU FAVOR+/ReLU feature maps, forward and backward"},
    {"data", pf::bench::run_data, "data preparation MB/s (gzip and plain FASTA) and loader tokens/s per rank"},
    {"linattn", pf::bench::run_linattn, "CPU causal linear attention forward + backward GFLOP/s and fraction of sgemm"},
    {"comm", pf::bench::run_comm, "scan, allreduce and allgather latency and bandwidth (run under mpirun)"},
    {"softmax", pf::bench::run_softmax, "exact softmax attention forward+backward on the CPU, causal and bidirectional"},
    {"train", pf::bench::run_train, "training-step tokens/s with its breakdown (under mpirun); longest length under a cap"},
    {"approx", pf::bench::run_approx, "random-feature attention vs exact softmax: error, top-1 agreement, time, memory"},
    {"kernels", pf::bench::run_kernels, "FAVOR+ attention vs exact softmax forward+backward time, GFLOP/s, crossover"},
    {"reductions", pf::bench::run_reductions,
     "the backward's column sums (bias, LayerNorm, embedding) on the CPU or GPU, GB/s and fraction of a copy"},
    {"packing", pf::bench::run_packing,
     "useful fraction of samples: one protein per sample, the cut stream, whole proteins packed"},
    {"generate", pf::bench::run_generate, "generation tokens/s and peak memory: recurrent form vs forward per token"},
    {"synthetic", pf::bench::run_synthetic, "synthetic protein FASTA drawn from a real file's lengths and residues"},
    {"watchdog", pf::bench::run_watchdog, "the cost of one watched wait (parallel.timeout_s's watchdog), ns per operation"},
};

void usage() {
  std::fprintf(stderr, "usage: performer-bench <subcommand> [options]\n\nsubcommands:\n");
  for (const auto& s : kSubcommands) std::fprintf(stderr, "  %-10s %s\n", s.name, s.what);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto& s : kSubcommands) {
    if (std::string(argv[1]) == s.name) {
      try {
        return s.run(argc - 1, argv + 1);
      } catch (const pf::ConfigError& e) {  // a usage error, as in every tool: status 2
        std::fprintf(stderr, "performer-bench %s: %s\n", s.name, e.what());
        return 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "performer-bench %s: %s\n", s.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "performer-bench: unknown subcommand '%s'\n\n", argv[1]);
  usage();
  return 2;
}
