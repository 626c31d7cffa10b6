// performer-bench watchdog: the cost of one watched wait (Watchdog::Op, as
// every communicator wait makes one: a name string, a lock to register it and
// one to record it) with the watchdog on (a timeout, its thread running), off
// (timeout 0: recorded, no thread) and without a watchdog (null), in ns per
// operation, single-threaded and from 2 threads at once.
//   performer-bench watchdog [--ops N] [--csv FILE]
#include "runtime/watchdog.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "launch/core/tool_cli.h"
#include "launch/bench/bench.h"
#include "launch/bench/csv_output.h"

namespace pf::bench {
namespace {

// ns per operation over `ops` operations on each of `threads` threads.
double ns_per_op(Watchdog* w, int64_t ops, int threads) {
  auto work = [w, ops] {
    for (int64_t i = 0; i < ops; ++i) {
      Watchdog::Op op(w, w ? "allreduce of 8544 x f32 (34176 B) on rank 0 of 2 (mpi)" : "");
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s * 1e9 / static_cast<double>(ops);
}

}  // namespace

int run_watchdog(int argc, char** argv) {
  CLI::App app{"the cost of one watched wait (Watchdog::Op): on, off and without a watchdog, ns per operation"};
  int64_t ops = 2000000;
  std::string csv;
  app.add_option("--ops", ops, "operations per thread and setting")->check(pf::positive_number());
  app.add_option("--csv", csv, "write the CSV here (default: stdout)");
  if (const auto status = parse_tool_args(app, argc, argv)) return *status;  // usage errors: 2
  CsvOutput csv_out(csv, "setting,threads,ops,ns_per_op\n");
  FILE* out = csv_out.file();
  for (int threads : {1, 2}) {
    Watchdog on(600, 0, [](int) {});
    Watchdog off(0, 0, [](int) {});
    const std::pair<const char*, Watchdog*> settings[] = {{"none", nullptr}, {"off", &off}, {"on", &on}};
    for (const auto& [name, w] : settings)
      std::fprintf(out, "%s,%d,%lld,%.1f\n", name, threads, static_cast<long long>(ops), ns_per_op(w, ops, threads));
  }
  csv_out.commit();
  return 0;
}

}  // namespace pf::bench
