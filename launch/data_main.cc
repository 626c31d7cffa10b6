// performer-data: protein data preparation and inspection.
//   performer-data prepare --output OUT.h5 [--val-fraction F] [--test-fraction F]
//                          [--seed S] [--map-unknown-to-x] [--ood-organism NAME ...] INPUT...
//   performer-data info FILE.h5
// Inputs: FASTA (.fa .fasta .faa .fas) or Swiss-Prot flat files (.dat .txt .sp),
// each optionally gzipped (.gz). The file schema is in docs/data.md.
// Exit status: 0 done; 2 a usage error (a bad option, bad fractions, an
// unknown input format, an output that is one of the inputs); 128 + N after
// SIGINT / SIGTERM (signal N), with the temporary output file removed; 1 any
// other error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#include "data/prepare.h"
#include "launch/train/stop_signal.h"

int main(int argc, char** argv) {
  CLI::App app{"performer-data: protein FASTA / Swiss-Prot to HDF5, and data file inspection"};
  app.require_subcommand(1);

  pf::PrepareOptions prep;
  prep.progress = &std::cerr;
  CLI::App* prepare = app.add_subcommand("prepare", "convert sequence files into one HDF5 data file");
  prepare->add_option("--output,-o", prep.output, "output HDF5 file")->required();
  prepare->add_option("--val-fraction", prep.val_fraction, "fraction of sequences in /valid")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  prepare->add_option("--test-fraction", prep.test_fraction, "fraction of sequences in /test")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  prepare->add_option("--seed", prep.seed, "key of the split hash")->capture_default_str();
  prepare->add_flag("--map-unknown-to-x", prep.map_unknown_to_x, "read unknown letters as X instead of failing");
  prepare->add_option("--ood-organism", prep.ood_organisms,
                      "hold out sequences whose OS= organism contains NAME (case-insensitive) in /ood (repeatable)")
      ->allow_extra_args(false);
  prepare->add_option("inputs", prep.inputs, "FASTA / Swiss-Prot files, optionally .gz")->required();

  std::string info_path;
  CLI::App* info = app.add_subcommand("info", "print the schema, counts and length statistics of a data file");
  info->add_option("file", info_path, "HDF5 data file")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the message (or the help)
    return code == 0 ? 0 : 2;
  }
  try {
    if (*prepare) {
      std::cerr << "performer-data prepare: " << prep.inputs.size() << " input(s) -> " << prep.output << "\n";
      // SIGINT / SIGTERM only set a flag; the record loop polls it, stops, and
      // removes the temporary file on its way out.
      pf::install_stop_handlers();
      prep.stop_requested = [] { return pf::stop_requested(); };
      const pf::PrepareSummary summary = pf::prepare_dataset(prep);
      std::cerr << pf::format_summary(summary);
      std::cerr << "wrote " << prep.output << "\n";
    } else if (*info) {
      std::cout << pf::format_info(pf::read_dataset_info(info_path));
    }
  } catch (const std::exception& e) {
    if (const int sig = pf::stop_signal_number(); sig != 0) {
      std::cerr << "performer-data: stopped by signal " << sig << " (" << strsignal(sig) << "): " << e.what() << "\n";
      return 128 + sig;
    }
    std::cerr << "performer-data: " << e.what() << "\n";
    return dynamic_cast<const pf::ValueError*>(&e) ? 2 : 1;
  }
  return 0;
}
