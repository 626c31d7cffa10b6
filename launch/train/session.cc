#include "launch/train/session.h"

#include <mpi.h>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"

namespace pf {

namespace {

int node_local_rank(MPI_Comm comm) {
  MPI_Comm local;
  PF_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  return r;
}

}  // namespace

Session::Session(const TrainConfig& cfg, MPI_Comm comm) {
  int world_size = 1;
  MPI_Comm_size(comm, &world_size);
  MPI_Comm_rank(comm, &rank_);
  validate_layout(cfg, world_size);
  const std::string& backend = cfg.device.backend;
  const int gpus = cuda_device_count();
  if (backend == "cuda") {
    PF_REQUIRE(ConfigError, gpus > 0, "device.backend = cuda, but " << cuda_unavailable_reason());
  }
  const bool use_gpu = backend == "cuda" || (backend == "auto" && gpus > 0);
  device_ = use_gpu ? Device::cuda(node_local_rank(comm) % gpus) : Device::cpu();
  tracker_ = std::make_unique<MemoryTracker>(device_, cfg.device.memory_cap);
  const HostStreamConfig streams = host_streams_from_env(parse_host_streams(cfg.device.cpu_streams));
  resources_ = std::make_unique<ExecResources>(device_, *tracker_, streams);
  std::unique_ptr<Communicator> world = use_gpu ? make_nccl_comm(comm) : make_mpi_comm(comm, streams);
  grid_ = std::make_unique<ParallelGrid>(std::move(world), static_cast<int>(cfg.parallel.sp));
}

LoaderOptions loader_options(const TrainConfig& cfg, const ParallelGrid& grid, const std::string& split,
                             bool shuffle) {
  LoaderOptions o;
  o.files = cfg.data.files;
  PF_REQUIRE(ConfigError, !o.files.empty(), "data.files is empty: name the prepared HDF5 file(s)");
  o.split = split;
  o.mode = cfg.data.mode;
  o.sample_length = cfg.data.sample_length;
  o.batch_size = cfg.data.batch_size;
  o.dp_size = grid.dp_size();
  o.dp_rank = grid.dp_rank();
  o.sp_size = grid.sp_size();
  o.sp_rank = grid.sp_rank();
  o.seed = cfg.data.seed;
  o.shuffle = shuffle;
  o.prefetch = cfg.data.prefetch;
  return o;
}

TokenBatch to_token_batch(const Batch& b, const ParallelGrid& grid) {
  TokenBatch t;
  t.batch = b.batch_size;
  t.n = b.slice_length;
  t.offset = b.global_offset;
  t.tokens = b.tokens_int32();
  const bool last = grid.sp_rank() == grid.sp_size() - 1;
  for (int64_t i = 0; i < b.batch_size; ++i) {
    t.lookahead.push_back(last ? -1 : static_cast<int32_t>(b.lookahead[i]));
    const SampleInfo& s = b.samples[i];
    t.sample_ids.push_back(s.valid ? static_cast<uint64_t>(s.sample) : ~uint64_t{0});
  }
  return t;
}

}  // namespace pf
