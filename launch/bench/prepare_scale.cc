// performer-bench synthetic / prepare_scale: preparation at scale.
//   performer-bench synthetic --like FILE --count N --output OUT.fasta[.gz]
//                   [--duplicates F] [--seed S]
//     writes N synthetic proteins drawn from FILE's lengths and residue
//     frequencies (data/synthetic_proteins.h), F of them exact repeats.
//   performer-bench prepare_scale --input FILE --output OUT.h5 [--budget SIZE]
//                   [--label NAME] [--csv FILE]
//     one `performer-data prepare` in this process (default fractions), then a
//     CSV row: sequences/s, residues/s, the process's peak RSS (getrusage),
//     the output's size and the duplicate sort's runs on disk. Run one per
//     process: the peak RSS is the process's own.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "data/prepare.h"
#include "data/synthetic_proteins.h"
#include "launch/bench/bench.h"
#include "runtime/byte_size.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace pf::bench {

int run_synthetic(int argc, char** argv) {
  CLI::App app{"synthetic protein FASTA from a real file's statistics"};
  std::string like, output;
  SyntheticOptions o;
  app.add_option("--like", like, "FASTA / Swiss-Prot file whose lengths and residue frequencies to draw from")
      ->required();
  app.add_option("--count", o.count, "sequences")->required()->check(CLI::PositiveNumber);
  app.add_option("--output", output, "FASTA file to write (.gz: gzip level 1)")->required();
  app.add_option("--duplicates", o.duplicate_fraction, "fraction of exact repeats of earlier records")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "generator seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.progress = &std::cerr;
  const ProteinStatistics stats = protein_statistics(like);
  const double t0 = seconds_now();
  const int64_t residues = write_synthetic_fasta(stats, o, output);
  std::fprintf(stderr, "wrote %lld sequences, %lld residues to %s in %.1f s\n", static_cast<long long>(o.count),
               static_cast<long long>(residues), output.c_str(), seconds_now() - t0);
  return 0;
}

int run_prepare_scale(int argc, char** argv) {
  CLI::App app{"one prepare: sequences/s, residues/s, peak RSS, output size"};
  std::string input, output, budget = "2GiB", label, csv;
  app.add_option("--input", input, "FASTA / Swiss-Prot input")->required();
  app.add_option("--output", output, "HDF5 file to write (removed afterwards unless --keep)")->required();
  app.add_option("--budget", budget, "--memory-budget of prepare")->capture_default_str();
  app.add_option("--label", label, "first CSV column (default: the input's name)");
  app.add_option("--csv", csv, "append the row to this CSV (header when new) instead of stdout");
  bool keep = false;
  app.add_flag("--keep", keep, "keep the output file");
  CLI11_PARSE(app, argc, argv);
  PrepareOptions o;
  o.inputs = {input};
  o.output = output;
  o.memory_budget = parse_byte_size(budget, "--budget");
  o.progress = &std::cerr;
  const double t0 = seconds_now();
  const PrepareSummary s = prepare_dataset(o);
  const double seconds = seconds_now() - t0;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const int64_t bytes = static_cast<int64_t>(std::filesystem::file_size(output));
  if (!keep) std::filesystem::remove(output);
  const bool fresh = !csv.empty() && !std::filesystem::exists(csv);
  std::FILE* out = csv.empty() ? stdout : std::fopen(csv.c_str(), "a");
  PF_REQUIRE(IoError, out != nullptr, "cannot write --csv file '" << csv << "'");
  if (csv.empty() || fresh)
    std::fprintf(out,
                 "label,sequences_read,duplicates,kept,residues,input_mb,budget_bytes,sort_runs,seconds,"
                 "sequences_per_s,residues_per_s,peak_rss_mb,output_mb\n");
  const int64_t kept = s.sequences_read - s.duplicates_dropped;
  std::fprintf(out, "%s,%lld,%lld,%lld,%lld,%.1f,%lld,%lld,%.2f,%.0f,%.0f,%.1f,%.1f\n",
               (label.empty() ? std::filesystem::path(input).filename().string() : label).c_str(),
               static_cast<long long>(s.sequences_read), static_cast<long long>(s.duplicates_dropped),
               static_cast<long long>(kept), static_cast<long long>(s.lengths.residues), s.bytes_read / 1e6,
               static_cast<long long>(o.memory_budget), static_cast<long long>(s.sort_runs), seconds,
               s.sequences_read / seconds, s.lengths.residues / seconds, usage.ru_maxrss / 1024.0, bytes / 1e6);
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace pf::bench
