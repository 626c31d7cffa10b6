// performer-bench subcommands. Each lives in launch/bench/<name>.cc and takes
// the arguments after its name; it prints progress to stderr and CSV to stdout
// or to --csv FILE. Timings live here, never in tests.
#pragma once

namespace pf::bench {

int run_gemm(int argc, char** argv);  // sgemm GFLOP/s of each CPU backend
int run_softmax(int argc, char** argv);  // exact softmax attention forward/backward on the CPU

}  // namespace pf::bench
