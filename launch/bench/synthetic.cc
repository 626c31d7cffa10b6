// performer-bench synthetic: inputs for preparation at scale
// (launch/studies/prepare_scale.sh).
//   performer-bench synthetic --like FILE --count N --output OUT.fasta[.gz]
//                   [--duplicates F] [--seed S]
//     writes N synthetic proteins drawn from FILE's lengths and residue
//     frequencies (data/synthetic_proteins.h), F of them exact repeats.
#include <zlib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "data/replaceable_output.h"
#include "data/synthetic_proteins.h"
#include "launch/bench/bench.h"
#include "launch/core/stop_signal.h"
#include "launch/core/tool_cli.h"
#include "runtime/clock.h"

namespace pf::bench {

int run_synthetic(int argc, char** argv) {
  CLI::App app{"synthetic protein FASTA from a real file's statistics"};
  std::string like, output;
  SyntheticOptions o;
  app.add_option("--like", like, "FASTA / Swiss-Prot file whose lengths and residue frequencies to draw from")
      ->required();
  app.add_option("--count", o.count, "sequences")->required()->check(pf::positive_number());
  app.add_option("--output", output, "FASTA file to write (.gz: gzip level 1)")->required();
  app.add_option("--duplicates", o.duplicate_fraction, "fraction of exact repeats of earlier records")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "generator seed")->capture_default_str();
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  install_stop_handlers();  // before any thread starts
  o.progress = &std::cerr;
  // Only an earlier output of this command may be replaced (data/replaceable_output.h);
  // gzread reads plain files as they are, so one test covers both forms.
  const OutputKind ours = {"a FASTA of performer-bench synthetic", [](const std::string& path) {
                             gzFile f = gzopen(path.c_str(), "rb");
                             if (f == nullptr) return false;
                             char line[64] = {0};
                             const bool first = gzgets(f, line, sizeof(line)) != nullptr &&
                                                std::string(line).rfind(">syn0 synthetic protein 0", 0) == 0;
                             gzclose(f);
                             return first;
                           }};
  ReplaceableOutput target("--output", output, ours, {like});
  const ProteinStatistics stats = protein_statistics(like);
  const double t0 = seconds_now();
  o.gzip = o.gzip || (output.size() > 3 && output.compare(output.size() - 3, 3, ".gz") == 0);
  int64_t residues = 0;
  auto write = [&](const std::string& tmp) { residues = write_synthetic_fasta(stats, o, tmp); };
  // SIGINT / SIGTERM / SIGUSR1 stop the write; its temporary file goes with the unwinding.
  o.stop_requested = [] { return stop_requested(); };
  try {
    target.write(write);
  } catch (const std::exception& e) {
    const int sig = stop_signal_number();
    if (sig == 0) throw;
    std::fprintf(stderr, "synthetic: stopped by signal %d (%s): %s; %s left as it was, no temporary file\n", sig,
                 strsignal(sig), e.what(), output.c_str());
    return 128 + sig;
  }
  std::fprintf(stderr, "wrote %lld sequences, %lld residues to %s in %.1f s\n", static_cast<long long>(o.count),
               static_cast<long long>(residues), output.c_str(), seconds_now() - t0);
  return 0;
}

}  // namespace pf::bench
