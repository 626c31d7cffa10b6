#include "launch/core/session.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "launch/core/mpi_program.h"
#include "model/packed_layout.h"
#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/watchdog.h"

namespace pf {

namespace {

struct NodePlace {
  int rank = 0;  // among the processes of this node
  int size = 1;
};

NodePlace node_place(MPI_Comm comm) {
  MPI_Comm local;
  PF_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
  NodePlace p;
  MPI_Comm_rank(local, &p.rank);
  MPI_Comm_size(local, &p.size);
  MPI_Comm_free(&local);
  return p;
}

// On rank 0: the ranks of each node in node-local order, nodes in order of
// their lowest rank, e.g. "node1 ranks 0,2 | node2 ranks 1,3" (the first 8
// nodes, then a count). Empty on the other ranks.
std::string placement_of(const NodePlace& node, MPI_Comm world) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  PF_MPI_CHECK(MPI_Get_processor_name(name, &length));
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  std::vector<char> names(rank == 0 ? static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME : 0);
  std::vector<int> local(rank == 0 ? size : 0);
  PF_MPI_CHECK(
      MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, world));
  PF_MPI_CHECK(MPI_Gather(&node.rank, 1, MPI_INT, local.data(), 1, MPI_INT, 0, world));
  if (rank != 0) return "";
  std::vector<std::string> hosts;
  std::vector<std::map<int, int>> ranks;  // per node: node-local rank -> rank
  for (int r = 0; r < size; ++r) {
    const std::string host(&names[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    auto it = std::find(hosts.begin(), hosts.end(), host);
    if (it == hosts.end()) {
      hosts.push_back(host);
      ranks.emplace_back();
      it = hosts.end() - 1;
    }
    ranks[static_cast<size_t>(it - hosts.begin())][local[r]] = r;
  }
  std::ostringstream out;
  const size_t shown = std::min<size_t>(hosts.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    out << (i ? " | " : "") << hosts[i] << " ranks ";
    bool first = true;
    for (const auto& [_, r] : ranks[i]) {
      out << (first ? "" : ",") << r;
      first = false;
    }
  }
  if (hosts.size() > shown) out << " | ... (" << hosts.size() << " nodes)";
  return out.str();
}

// device.comm resolved: "auto" becomes mpi on the CPU; on GPUs nccl when every
// node has a GPU per rank (decided alike on every rank), else staged.
std::string resolve_comm(const std::string& comm, bool use_gpu, int gpus, const NodePlace& node, MPI_Comm world) {
  if (!use_gpu) {
    PF_REQUIRE(ConfigError, comm != "nccl", "device.comm = nccl needs GPUs, but the run is on the CPU");
    return comm == "auto" ? "mpi" : comm;
  }
  PF_REQUIRE(ConfigError, comm != "mpi", "device.comm = mpi moves host buffers only; on GPUs use nccl, staged or auto");
  if (comm != "auto") return comm;
  int enough = gpus >= node.size ? 1 : 0, everywhere = 0;
  PF_MPI_CHECK(MPI_Allreduce(&enough, &everywhere, 1, MPI_INT, MPI_MIN, world));
  return everywhere ? "nccl" : "staged";
}

}  // namespace

Session::~Session() = default;

Session::Session(const TrainConfig& cfg, MPI_Comm comm) : comm_(comm) {
  int world_size = 1;
  MPI_Comm_size(comm, &world_size);
  MPI_Comm_rank(comm, &rank_);
  // Before any communicator: they report their waits to it. MPI_Abort ends
  // every rank of the job (the launcher kills the others).
  watchdog_ = std::make_unique<Watchdog>(cfg.parallel.timeout_s, rank_, [comm](int code) {
    // Should the abort itself hang (a launcher that cannot reach a lost
    // node), the process still ends.
    std::thread([code] {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      std::_Exit(code);
    }).detach();
    MPI_Abort(comm, code);
    std::_Exit(code);
  });
  validate_ranks(cfg, world_size);
  const std::string& backend = cfg.device.backend;
  const int gpus = cuda_device_count();
  if (backend == "cuda") {
    PF_REQUIRE(ConfigError, gpus > 0, "device.backend = cuda, but " << cuda_unavailable_reason());
  }
  // "auto" takes GPUs only when every rank has one: the ranks of one job
  // share one backend (and the collectives that choose the communicator).
  int has_gpu = gpus > 0 ? 1 : 0, all_have_gpu = 0;
  PF_MPI_CHECK(MPI_Allreduce(&has_gpu, &all_have_gpu, 1, MPI_INT, MPI_MIN, comm));
  const bool use_gpu = backend == "cuda" || (backend == "auto" && all_have_gpu == 1);
  const NodePlace node = node_place(comm);
  placement_ = placement_of(node, comm);
  node_ranks_ = node.size;
  device_ = use_gpu ? Device::cuda(node.rank % gpus) : Device::cpu();
  tracker_ = std::make_unique<MemoryTracker>(device_, cfg.device.memory_cap);
  const HostStreamConfig streams = host_streams_from_env(parse_host_streams(cfg.device.cpu_streams));
  resources_ = std::make_unique<ExecResources>(device_, *tracker_, streams);
  comm_backend_ = resolve_comm(cfg.device.comm, use_gpu, gpus, node, comm);
  std::unique_ptr<Communicator> world;
  if (comm_backend_ == "nccl") {
    world = make_nccl_comm(comm, watchdog_.get());
  } else if (comm_backend_ == "staged") {
    // On GPUs the MPI half runs on its own host stream, so that it is ordered
    // like NCCL's work; on the CPU it follows device.cpu_streams.
    HostStreamConfig staged = streams;
    if (use_gpu) staged.async = true;
    world = make_staged_comm(comm, device_, staged, watchdog_.get());
  } else {
    world = make_mpi_comm(comm, streams, watchdog_.get());
  }
  set_current_device(device_);
  grid_ = std::make_unique<ParallelGrid>(std::move(world), static_cast<int>(cfg.parallel.sp));
}

void Session::root_check(const std::function<void()>& check) { check_on_rank0(comm_, check, watchdog_.get()); }

std::string Session::root_value(const std::function<std::string()>& value) {
  return value_of_rank0(comm_, value, watchdog_.get());
}

LoaderOptions loader_options(const TrainConfig& cfg, const ParallelGrid& grid, const std::string& split,
                             LoaderUse use) {
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
  o.shuffle = use == LoaderUse::Training && cfg.data.shuffle;
  o.sampling = use == LoaderUse::Training ? cfg.data.sampling : Sampling::Sequence;
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
  // Each row's runs are the sequences of its sample that meet this slice
  // (the first may have begun on an earlier rank: it starts `position` rows
  // before the slice), laid out by the one builder of pieces.
  const int64_t begin = b.global_offset, end = b.global_offset + b.slice_length;
  for (const std::vector<SliceSegment>& row : b.segments) {
    SampleSequences sequences(begin - (row.empty() ? 0 : row.front().position));
    for (size_t i = 0; i < row.size(); ++i) {
      const SliceSegment& g = row[i];
      const int64_t next = i + 1 < row.size() ? row[i + 1].begin : b.slice_length;
      sequences.add(g.position + next - g.begin, g.protein >= 0 ? static_cast<uint64_t>(g.protein) : ~uint64_t{0},
                    g.joins);
    }
    t.packed.samples.push_back(sequences.pieces(begin, row.empty() ? begin : end));
  }
  return t;
}

}  // namespace pf
