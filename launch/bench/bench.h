// performer-bench subcommands. Each lives in launch/bench/<name>.cc and takes
// the arguments after its name; it prints progress to stderr and CSV to stdout
// or to --csv FILE. Timings live here, never in tests. Those that use MPI
// (comm, train) run in the frame of launch/core/mpi_program.h.
#pragma once

namespace pf::bench {

int run_gemm(int argc, char** argv);  // sgemm GFLOP/s of each CPU backend
int run_posops(int argc, char** argv);  // CPU position-wise ops: GB/s, linear GFLOP/s
int run_feature_map(int argc, char** argv);  // FAVOR+/ReLU feature maps, forward and backward
int run_data(int argc, char** argv);  // data preparation MB/s and loader tokens/s per rank
int run_linattn(int argc, char** argv);  // causal linear attention fwd+bwd GFLOP/s
int run_comm(int argc, char** argv);  // scan/allreduce/allgather latency and bandwidth (under mpirun)
int run_softmax(int argc, char** argv);  // exact softmax attention forward/backward on the CPU
int run_train(int argc, char** argv);  // training-step tokens/s, breakdown (under mpirun); longest length under a cap
int run_approx(int argc, char** argv);  // random-feature vs exact softmax attention: errors, top-1, time, memory
int run_kernels(int argc, char** argv);  // FAVOR+ composite vs exact softmax: fwd+bwd time, GFLOP/s, crossover
int run_reductions(int argc, char** argv);  // backward column sums (bias, LayerNorm, embedding): GB/s vs a copy
int run_packing(int argc, char** argv);  // useful fraction of samples: single, concat, packed
int run_generate(int argc, char** argv);  // generation tokens/s and peak: recurrent form vs forward per token
int run_synthetic(int argc, char** argv);  // synthetic protein FASTA from a real file's statistics
int run_watchdog(int argc, char** argv);  // the cost of one watched wait, ns per operation

}  // namespace pf::bench
