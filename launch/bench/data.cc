// performer-bench data: throughput of data preparation and of the loader.
//   prepare: MB/s of FASTA text (uncompressed bytes) through read-only parsing
//            and through the full prepare (parse, dedup, split, HDF5 write),
//            for the gzipped input and a decompressed copy in a temp dir;
//   loader:  tokens/s per rank for concat samples of length L (default 8192),
//            one rank of sp = 1 and of sp = 4, synchronous reads (prefetch 0:
//            the read cost itself) and with the read-ahead thread (prefetch 2).
// CSV on stdout: what,case,amount,seconds,rate,unit,cpu_seconds. `seconds` is
// the best wall time; cpu_seconds is the process CPU time of that repetition
// (all threads), which shows how much of the wall time was waiting for cores
// on a shared machine.
#include <unistd.h>
#include <zlib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <utility>
#include <string>

#include "data/loader.h"
#include "data/prepare.h"
#include "data/sequence_reader.h"
#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/timing.h"
#include "launch/core/stop_signal.h"

namespace pf::bench {

namespace {

void decompress(const std::string& from, const std::string& to) {
  gzFile in = gzopen(from.c_str(), "rb");
  PF_REQUIRE(IoError, in != nullptr, "cannot open '" << from << "'");
  std::FILE* out = std::fopen(to.c_str(), "wb");
  PF_REQUIRE(IoError, out != nullptr, "cannot write '" << to << "'");
  std::vector<char> buf(1 << 20);
  int n = 0;
  while ((n = gzread(in, buf.data(), static_cast<unsigned>(buf.size()))) > 0)
    std::fwrite(buf.data(), 1, static_cast<size_t>(n), out);
  gzclose(in);
  std::fclose(out);
}

double cpu_now() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Best wall time of `reps` runs after a warm-up, and the CPU time of that run.
template <typename F>
std::pair<double, double> best_wall_and_cpu(F&& fn, int reps) {
  fn();
  double best = 1e30, cpu = 0;
  for (int r = 0; r < reps; ++r) {
    const double w0 = seconds_now(), c0 = cpu_now();
    fn();
    const double w = seconds_now() - w0, c = cpu_now() - c0;
    if (w < best) {
      best = w;
      cpu = c;
    }
  }
  return {best, cpu};
}

int64_t read_only(const std::string& path) {
  SequenceReader reader(path);
  SequenceRecord rec;
  while (reader.next(rec)) {
  }
  return reader.bytes_read();
}

}  // namespace

int run_data(int argc, char** argv) {
  CLI::App app{"data preparation and loader throughput"};
  std::string input = "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz";
  std::string tmp = std::filesystem::temp_directory_path().string();
  int64_t length = 8192, batch = 4, steps = 200;
  int reps = 3;
  app.add_option("--input", input, "gzipped FASTA file")->capture_default_str();
  app.add_option("--tmp", tmp, "an existing directory for the scratch folder (the decompressed copy, the HDF5 file)")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  app.add_option("--length", length, "sample length L (concat mode)")
      ->capture_default_str()
      ->check(pf::positive_number());
  app.add_option("--batch", batch, "samples per step")->capture_default_str()->check(pf::positive_number());
  app.add_option("--steps", steps, "loader steps per timing")->capture_default_str()->check(pf::positive_number());
  app.add_option("--reps", reps, "timed repetitions (best is kept)")
      ->capture_default_str()
      ->check(pf::positive_number());
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  install_stop_handlers();  // before any thread starts

  const std::string dir = tmp + "/pf_bench_data_" + std::to_string(::getpid());
  // SIGINT / SIGTERM set a flag, polled between measurements and steps: the
  // run stops with an error and its scratch folder (copies of the input, 20+
  // MB) is removed on the way out, as on a normal exit.
  auto poll_stop = [&] {
    if (stop_requested())
      throw IoError("stopped by signal " + std::to_string(stop_signal_number()) + "; removed " + dir);
  };
  std::filesystem::create_directory(dir);  // in --tmp, which exists
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  const std::string plain = dir + "/input.fasta", h5 = dir + "/data.h5";
  std::string base = std::filesystem::path(input).filename().string();
  if (base.size() > 3 && base.compare(base.size() - 3, 3, ".gz") == 0) base.resize(base.size() - 3);
  decompress(input, plain);
  poll_stop();

  std::printf("what,case,amount,seconds,rate,unit,cpu_seconds\n");
  for (const auto& [label, path] : {std::pair<std::string, std::string>{"gzip", input}, {"plain", plain}}) {
    int64_t bytes = 0;
    const auto [t_read, c_read] = best_wall_and_cpu([&] { bytes = read_only(path); }, reps);
    std::printf("parse,%s,%lld,%.4f,%.1f,MB/s,%.4f\n", label.c_str(), static_cast<long long>(bytes), t_read,
                bytes / t_read * 1e-6, c_read);
    poll_stop();
    PrepareOptions o;
    o.inputs = {path};
    o.output = h5;
    o.stop_requested = [] { return stop_requested(); };
    const auto [t_prep, c_prep] = best_wall_and_cpu([&] { prepare_dataset(o); }, reps);
    std::printf("prepare,%s,%lld,%.4f,%.1f,MB/s,%.4f\n", label.c_str(), static_cast<long long>(bytes), t_prep,
                bytes / t_prep * 1e-6, c_prep);
    std::fflush(stdout);
  }
  for (int64_t sp : {int64_t{1}, int64_t{4}}) {
    for (int64_t prefetch : {int64_t{0}, int64_t{2}}) {
      LoaderOptions o;
      o.files = {h5};
      o.mode = SampleMode::Concat;
      o.sample_length = length;
      o.batch_size = batch;
      o.sp_size = sp;
      o.sp_rank = sp - 1;
      o.prefetch = prefetch;
      DataLoader loader(o);
      int64_t tokens = 0;
      const auto [t, c] = best_wall_and_cpu(
          [&] {
            tokens = 0;
            for (int64_t s = 0; s < steps; ++s) {
              poll_stop();
              tokens += static_cast<int64_t>(loader.next().tokens.size());
            }
          },
          reps);
      std::printf("loader,L=%lld sp=%lld prefetch=%lld,%lld,%.4f,%.3g,tokens/s/rank,%.4f\n",
                  static_cast<long long>(length), static_cast<long long>(sp), static_cast<long long>(prefetch),
                  static_cast<long long>(tokens), t, tokens / t, c);
      std::fflush(stdout);
    }
  }
  std::fprintf(stderr, "input %s (%s decompressed)\n", input.c_str(), base.c_str());
  return 0;
}

}  // namespace pf::bench
