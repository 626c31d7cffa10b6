// performer-data: protein data preparation and inspection.
//   performer-data prepare --output OUT.h5 [--val-fraction F] [--test-fraction F]
//                          [--seed S] [--map-unknown-to-x] [--ood-organism NAME ...] INPUT...
//                          [--cluster-identity T [--cluster-coverage C] [--cluster-mode linclust|cluster]
//                           [--families FILE.tsv]]
//                          [--mmseqs PATH] [--threads N] [--memory-budget SIZE]
//   performer-data info FILE.h5
//   performer-data audit FILE.h5 [--identity T [--max-fraction F]] [--coverage C] [--json]
// Inputs: FASTA (.fa .fasta .faa .fas) or Swiss-Prot flat files (.dat .txt .sp),
// each optionally gzipped (.gz). The file schema is in docs/data.md.
// Exit status: 0 done; 2 a usage error (a bad option, bad fractions or budget, an
// unknown input format, an output that is one of the inputs); 128 + N after
// SIGINT / SIGTERM (signal N), with the temporary output file removed; 3 an
// audit that found more leaks than --identity / --max-fraction allow; 1 any
// other error (MMseqs2 missing, failing or killed among them).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>

#include "data/audit.h"
#include "data/prepare.h"
#include "launch/core/stop_signal.h"
#include "launch/core/tool_cli.h"
#include "runtime/byte_size.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/task_pool.h"

int main(int argc, char** argv) {
  CLI::App app{"performer-data: protein FASTA / Swiss-Prot to HDF5, and data file inspection"};
  app.require_subcommand(1);

  pf::PrepareOptions prep;
  prep.progress = &std::cerr;
  CLI::App* prepare = app.add_subcommand("prepare", "convert sequence files into one HDF5 data file");
  prepare->add_option("--output,-o", prep.output, "output HDF5 file")->required();
  prepare->add_option("--val-fraction", prep.val_fraction, "fraction of sequences in /valid")
      ->check(pf::number_in(0.0, 1.0))
      ->capture_default_str();
  prepare->add_option("--test-fraction", prep.test_fraction, "fraction of sequences in /test")
      ->check(pf::number_in(0.0, 1.0))
      ->capture_default_str();
  prepare->add_option("--seed", prep.seed, "key of the split hash")->capture_default_str();
  prepare->add_flag("--map-unknown-to-x", prep.map_unknown_to_x, "read unknown letters as X instead of failing");
  prepare
      ->add_option("--ood-organism", prep.ood_organisms,
                   "hold out sequences whose OS= organism contains NAME (case-insensitive) in /ood (repeatable)")
      ->allow_extra_args(false);
  CLI::Option* cluster_identity =
      prepare
          ->add_option("--cluster-identity", prep.cluster.identity,
                       "split by MMseqs2 cluster at this sequence identity (e.g. 0.5); 0 splits by sequence hash")
          ->check(pf::number_in(0.0, 1.0))
          ->capture_default_str();
  prepare
      ->add_option("--cluster-coverage", prep.cluster.coverage,
                   "coverage of both sequences for clustering; of the held-out sequence for the leak purge")
      ->check(pf::number_in(0.0, 1.0))
      ->capture_default_str()
      ->needs(cluster_identity);
  prepare->add_option("--cluster-mode", prep.cluster.mode, "MMseqs2 easy-linclust (linear time) or easy-cluster")
      ->check(CLI::IsMember({"linclust", "cluster"}))
      ->capture_default_str()
      ->needs(cluster_identity);
  prepare->add_option("--families", prep.families,
                      "with --cluster-identity: take the clusters from this table (name<TAB>family per line) "
                      "instead of clustering with MMseqs2");
  std::string mmseqs = "mmseqs";
  int threads = 0;
  prepare->add_option("--mmseqs", mmseqs, "the MMseqs2 program")->capture_default_str();
  prepare
      ->add_option("--threads", threads,
                   "threads for MMseqs2 and for compressing the output (0: all cores; at most " +
                       std::to_string(pf::kMaxThreads) + ")")
      ->check(CLI::Range(0, pf::kMaxThreads))
      ->capture_default_str();
  std::string memory_budget = "2GiB";
  prepare
      ->add_option("--memory-budget", memory_budget,
                   "memory for finding duplicates (e.g. 512MiB, 4M); beyond it sorted runs go to disk beside the "
                   "output (at least 1MiB)")
      ->capture_default_str();
  prepare->add_option("inputs", prep.inputs, "FASTA / Swiss-Prot files, optionally .gz")->required();

  std::string info_path;
  CLI::App* info = app.add_subcommand("info", "print the schema, counts and length statistics of a data file");
  info->add_option("file", info_path, "HDF5 data file")->required();

  pf::AuditOptions audit_opt;
  audit_opt.progress = &std::cerr;
  double audit_identity = 0, audit_max_fraction = 0;
  bool audit_json = false;
  CLI::App* audit = app.add_subcommand(
      "audit", "search /valid, /test (and /ood) against /train with MMseqs2 and count close relatives");
  audit->add_option("file", audit_opt.path, "HDF5 data file")->required();
  CLI::Option* audit_gate =
      audit
          ->add_option("--identity", audit_identity,
                       "fail (exit 3) when more than --max-fraction of /valid or /test have a hit at this identity")
          ->check(pf::number_in(0.0, 1.0, true));
  audit->add_option("--max-fraction", audit_max_fraction, "allowed fraction for --identity")
      ->check(pf::number_in(0.0, 1.0))
      ->capture_default_str()
      ->needs(audit_gate);
  audit
      ->add_option("--coverage", audit_opt.coverage,
                   "coverage of the held-out sequence a hit needs (default: the file's clustering coverage, else 0.8)")
      ->check(pf::number_in(0.0, 1.0));
  audit->add_option("--mmseqs", mmseqs, "the MMseqs2 program")->capture_default_str();
  audit
      ->add_option("--threads", threads,
                   "MMseqs2 threads (0: all cores; at most " + std::to_string(pf::kMaxThreads) + ")")
      ->check(CLI::Range(0, pf::kMaxThreads));
  audit->add_flag("--json", audit_json, "print the result as JSON on stdout");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the message (or the help)
    return code == 0 ? 0 : 2;
  }
  try {
    if (*prepare) {
      PF_REQUIRE(pf::ValueError,
                 prep.cluster.identity > 0 ||
                     (prepare->count("--cluster-coverage") == 0 && prepare->count("--cluster-mode") == 0),
                 "--cluster-coverage and --cluster-mode set how a cluster split clusters; --cluster-identity 0 "
                 "is the split by sequence hash, which clusters nothing");
      std::cerr << "performer-data prepare: " << prep.inputs.size() << " input(s) -> " << prep.output << "\n";
      // SIGINT / SIGTERM only set a flag; the record loop polls it, stops, and
      // removes the temporary file on its way out.
      pf::install_stop_handlers();
      prep.stop_requested = [] { return pf::stop_requested(); };
      prep.mmseqs.program = mmseqs;
      prep.mmseqs.threads = threads;
      prep.threads = threads;
      prep.memory_budget = pf::parse_byte_size(memory_budget, "--memory-budget");
      const double t0 = pf::seconds_now();
      const pf::PrepareSummary summary = pf::prepare_dataset(prep);
      std::cerr << pf::format_summary(summary);
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      std::fprintf(stderr, "wrote %s in %.1f s; peak resident memory %ld MiB\n", prep.output.c_str(),
                   pf::seconds_now() - t0, usage.ru_maxrss / 1024);
    } else if (*info) {
      std::cout << pf::format_info(pf::read_dataset_info(info_path));
    } else if (*audit) {
      pf::install_stop_handlers();
      audit_opt.mmseqs.program = mmseqs;
      audit_opt.mmseqs.threads = threads;
      audit_opt.mmseqs.stop_requested = [] { return pf::stop_requested(); };
      // The gate is on whenever --identity is given.
      const bool gate = audit->count("--identity") > 0;
      if (gate) audit_opt.thresholds.push_back(audit_identity);
      const pf::AuditResult r = pf::run_audit(audit_opt);
      const std::vector<std::string> failures =
          gate ? pf::audit_failures(r, audit_identity, audit_max_fraction) : std::vector<std::string>{};
      if (audit_json) {
        nlohmann::json j = {{"file", r.path},
                            {"split_rule", r.split_rule},
                            {"mmseqs_version", r.mmseqs_version},
                            {"coverage", r.coverage},
                            {"evalue", r.evalue},
                            {"train_sequences", r.train_sequences},
                            {"thresholds", r.thresholds},
                            {"failures", failures}};
        for (const pf::AuditSplit& sp : r.splits)
          j["splits"].push_back({{"name", sp.name}, {"sequences", sp.sequences}, {"with_hit", sp.with_hit}});
        if (gate) j["identity"] = audit_identity, j["max_fraction"] = audit_max_fraction;
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << pf::format_audit(r);
      }
      for (const std::string& f : failures) std::cerr << "performer-data audit: leak: " << f << "\n";
      if (!failures.empty()) return 3;
    }
  } catch (const std::exception& e) {
    if (const int sig = pf::stop_signal_number(); sig != 0) {
      std::cerr << "performer-data: stopped by signal " << sig << " (" << strsignal(sig) << "): " << e.what() << "\n";
      return 128 + sig;
    }
    std::cerr << "performer-data: " << e.what() << "\n";
    const bool usage = dynamic_cast<const pf::ValueError*>(&e) || dynamic_cast<const pf::ConfigError*>(&e);
    return usage ? 2 : 1;
  }
  return 0;
}
