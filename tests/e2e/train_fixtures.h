// Shared set-up of the training tests: real proteins (QUERY.fasta.gz from the
// mmseqs2 examples) prepared once per test process into a temporary folder,
// and a tiny configuration built from key=value overrides.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "launch/core/train_config.h"

namespace pf::test {

inline const char* kQueryFasta = "/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz";

// The folders rank 0 made with shared_temp_dir, removed when the process
// exits (after MPI_Finalize, so no rank still reads them). The one piece of
// process-wide state in the test support: tests of one process share folders.
inline std::vector<std::string>& shared_temp_dirs_made() {
  static std::vector<std::string> dirs;
  static const bool cleanup_registered = [] {
    std::atexit([] {
      std::error_code ignored;
      for (const std::string& d : shared_temp_dirs_made()) std::filesystem::remove_all(d, ignored);
    });
    return true;
  }();
  (void)cleanup_registered;
  return dirs;
}

// A folder shared by the ranks of `comm` (named after rank 0's pid), emptied
// and created by rank 0, and removed when the process exits. The first
// barrier keeps rank 0 from removing a folder of the same tag that another
// rank is still reading (a broadcast does not wait for its receivers).
inline std::string shared_temp_dir(MPI_Comm comm, const std::string& tag) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Barrier(comm);
  long pid = static_cast<long>(::getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, comm);
  const std::string dir = (std::filesystem::temp_directory_path() / ("pf-" + tag + "-" + std::to_string(pid))).string();
  if (rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    shared_temp_dirs_made().push_back(dir);
  }
  MPI_Barrier(comm);
  return dir;
}

inline std::string prepared_proteins(MPI_Comm comm, const std::string& dir) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string out = dir + "/proteins.h5";
  if (rank == 0) {
    PrepareOptions o;
    o.inputs = {kQueryFasta};
    o.output = out;
    o.val_fraction = 0.1;
    o.test_fraction = 0.05;
    prepare_dataset(o);
  }
  MPI_Barrier(comm);
  return out;
}

// Sets one section.key=value override in `o`, replacing an earlier one of
// the same key (a key may be given once: load_train_config refuses repeats).
inline void set_override(std::vector<std::string>& o, const std::string& assignment) {
  const std::string key = assignment.substr(0, assignment.find('=') + 1);
  for (std::string& a : o)
    if (a.compare(0, key.size(), key) == 0) {
      a = assignment;
      return;
    }
  o.push_back(assignment);
}
inline void set_overrides(std::vector<std::string>& o, const std::vector<std::string>& extra) {
  for (const std::string& a : extra) set_override(o, a);
}

inline std::vector<std::string> tiny_run(const std::string& data, const std::string& dir, int sp, int batch) {
  return {"model.layers=2",
          "model.width=32",
          "model.heads=2",
          "model.ffn=64",
          "model.features=16",
          "model.chunk=16",
          "data.files=[\"" + data + "\"]",
          "data.sample_length=48",
          "data.batch_size=" + std::to_string(batch),
          "optimizer.lr=3e-3",
          "optimizer.warmup_steps=2",
          "train.steps=8",
          "train.log_interval=100",
          "train.eval_interval=0",
          "train.eval_batches=2",
          "train.metrics=\"" + dir + "/metrics.jsonl\"",
          "checkpoint.dir=\"" + dir + "/ckpt\"",
          "checkpoint.interval=0",
          "parallel.sp=" + std::to_string(sp)};
}

// Losses of the metrics file, one per step line.
inline std::vector<double> metric_losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"eval\"") != std::string::npos) continue;
    const size_t k = line.find("\"loss\":");
    if (k != std::string::npos) out.push_back(std::stod(line.substr(k + 7)));
  }
  return out;
}

}  // namespace pf::test
