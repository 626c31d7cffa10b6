// Distributed exclusive scans (chain, allgather, recursive doubling), written
// once over the Communicator interface and the ScanCombine interface, so the
// same code runs on MPI (host buffers) and NCCL (device buffers, stream
// ordered). Every algorithm works on "virtual" ranks v: v = r going forward,
// v = P-1-r in reverse; out_v = T_0 . ... . T_{v-1} with the combine's
// `earlier` operand always the block of smaller v.
#include "runtime/scan.h"

#include <algorithm>
#include <vector>

#include "runtime/check.h"
#include "runtime/scan_impl.h"

namespace pf {

const char* scan_direction_name(ScanDirection direction) {
  return direction == ScanDirection::Forward ? "forward" : "reverse";
}

const char* scan_algorithm_name(ScanAlgorithm algorithm) {
  switch (algorithm) {
    case ScanAlgorithm::Auto: return "auto";
    case ScanAlgorithm::Chain: return "chain";
    case ScanAlgorithm::Allgather: return "allgather";
    case ScanAlgorithm::RecursiveDoubling: return "recursive_doubling";
  }
  return "?";
}

ScanAlgorithm parse_scan_algorithm(const std::string& name) {
  for (ScanAlgorithm a :
       {ScanAlgorithm::Auto, ScanAlgorithm::Chain, ScanAlgorithm::Allgather, ScanAlgorithm::RecursiveDoubling})
    if (name == scan_algorithm_name(a)) return a;
  PF_REQUIRE(ValueError, false,
             "unknown scan algorithm '" << name << "' (expected auto, chain, allgather or recursive_doubling)");
  return ScanAlgorithm::Auto;
}

// Auto (docs/comm.md has the argument and the measurement that is kept):
//  - up to 8 ranks: in a sweep on a 2-core machine (Open MPI, shared memory,
//    P = 2, 4, 8, 4 KiB to 64 MiB; its data was not kept, docs/comm.md) the
//    chain was fastest or tied at every size, and it needs the least memory;
//    at P = 2 every algorithm is one message.
//  - beyond, from the cost model: recursive doubling pays ceil(log2 P) rounds
//    of n bytes, the pipelined chain about P-2 segment hops plus n bytes once,
//    so recursive doubling wins while n (ceil(log2 P) - 1) < (P - 2) S.
ScanAlgorithm choose_scan_algorithm(int ranks, int64_t bytes, int64_t chain_segment_bytes) {
  constexpr int kMeasuredRanks = 8;
  if (ranks <= kMeasuredRanks) return ScanAlgorithm::Chain;
  int rounds = 0;
  while ((int64_t{1} << rounds) < ranks) ++rounds;
  const bool latency_bound = bytes * (rounds - 1) < static_cast<int64_t>(ranks - 2) * chain_segment_bytes;
  return latency_bound ? ScanAlgorithm::RecursiveDoubling : ScanAlgorithm::Chain;
}

namespace {

// One scratch buffer for one scan call: a slot of the caller's ScanWorkspace,
// or memory of its own, released in the order of the scan's stream (queued
// transfers may still use it).
class Scratch {
 public:
  Scratch(ScanWorkspace* workspace, int slot, MemoryTracker& tracker, int64_t bytes, const Stream& stream)
      : tracker_(tracker), bytes_(bytes), stream_(stream) {
    if (bytes <= 0) return;
    if (workspace) {
      ptr_ = workspace->buffer(slot, bytes, stream);
    } else {
      ptr_ = device_allocate(tracker, bytes, "scan workspace");
      stream_wait_stream(stream, tracker.stream());  // allocated in the tracker's stream order
      owned_ = true;
    }
  }
  ~Scratch() {
    if (owned_) device_free(tracker_, ptr_, bytes_, "scan workspace", &stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  MemoryTracker& tracker_;
  int64_t bytes_;
  Stream stream_;
  void* ptr_ = nullptr;
  bool owned_ = false;
};

// Everything one scan call needs, with byte offsets of element ranges.
struct ScanCall {
  Communicator& comm;
  const ScanCombine& combine;
  ScanWorkspace* workspace;
  MemoryTracker& tracker;
  Stream stream;
  DType dtype;
  int64_t esize;  // bytes per element
  int64_t count;  // elements per rank
  int ranks;
  int v;  // virtual rank
  bool reverse;

  int real(int virtual_rank) const { return reverse ? ranks - 1 - virtual_rank : virtual_rank; }
  int64_t bytes(int64_t elements) const { return elements * esize; }
  void copy(void* dst, const void* src, int64_t elements) const {
    if (dst == src || elements == 0) return;
    copy_bytes(stream, dst, stream.device, src, stream.device, bytes(elements));
  }
};

const char* at(const void* base, int64_t byte_offset) { return static_cast<const char*>(base) + byte_offset; }
char* at(void* base, int64_t byte_offset) { return static_cast<char*>(base) + byte_offset; }

// Chain: v receives the prefix from v-1 and sends prefix . T_v to v+1, in
// segments so that consecutive hops overlap (receive segment s while sending
// segment s-1).
void scan_chain(const ScanCall& c, const void* in, void* out, int64_t segment) {
  const int prev = c.v > 0 ? c.real(c.v - 1) : -1;
  const int next = c.v + 1 < c.ranks ? c.real(c.v + 1) : -1;
  const int64_t segments = (c.count + segment - 1) / segment;
  auto seg_len = [&](int64_t s) { return std::min(segment, c.count - s * segment); };

  if (prev < 0) {  // v == 0: send T_0 on, then take the identity (in place: after the sends)
    for (int64_t s = 0; s < segments; ++s) c.comm.send(at(in, c.bytes(s * segment)), seg_len(s), c.dtype, next);
    c.combine.fill_identity(out, c.count, c.stream);
    return;
  }
  if (next < 0) {  // the last rank only receives
    for (int64_t s = 0; s < segments; ++s) c.comm.recv(at(out, c.bytes(s * segment)), seg_len(s), c.dtype, prev);
    return;
  }
  Scratch work(c.workspace, 0, c.tracker, c.bytes(c.count), c.stream);
  const void* mine = in;
  if (in == out) {  // out is about to receive the prefix: keep T_v in the workspace
    c.copy(work.get(), in, c.count);
    mine = work.get();
  }
  for (int64_t s = 0; s <= segments; ++s) {
    c.comm.group_begin();
    if (s < segments) c.comm.recv(at(out, c.bytes(s * segment)), seg_len(s), c.dtype, prev);
    if (s > 0) c.comm.send(at(work.get(), c.bytes((s - 1) * segment)), seg_len(s - 1), c.dtype, next);
    c.comm.group_end();
    if (s < segments) {
      const int64_t off = c.bytes(s * segment);
      c.combine.combine(at(out, off), at(mine, off), at(work.get(), off), seg_len(s), c.stream);
    }
  }
}

// Allgather: every rank gets every block total and combines blocks 0..v-1 in
// order.
void scan_allgather(const ScanCall& c, const void* in, void* out) {
  Scratch gathered(c.workspace, 0, c.tracker, c.bytes(c.count) * c.ranks, c.stream);
  c.comm.allgather(in, gathered.get(), c.count, c.dtype);
  auto block = [&](int virtual_rank) { return at(gathered.get(), c.bytes(c.count) * c.real(virtual_rank)); };
  if (c.v == 0) {
    c.combine.fill_identity(out, c.count, c.stream);
  } else if (c.v == 1) {
    c.copy(out, block(0), c.count);
  } else {
    c.combine.combine(block(0), block(1), out, c.count, c.stream);
    for (int i = 2; i < c.v; ++i) c.combine.combine(out, block(i), out, c.count, c.stream);
  }
}

// Recursive doubling for any P. Before the round of distance d, `partial`
// holds T over [v-d+1, v] and out holds T over [v-d+1, v-1] (both clipped at
// 0). Rank v sends partial to v+d and receives W = T over [v-2d+1, v-d] from
// v-d, which precedes both windows: out = W . out, partial = W . partial.
void scan_recursive_doubling(const ScanCall& c, const void* in, void* out) {
  // `partial` starts as the input itself; it is copied only in place, where
  // out (== in) receives before partial is first updated.
  Scratch partial_buf(c.workspace, 0, c.tracker, c.v + 1 < c.ranks ? c.bytes(c.count) : 0, c.stream);
  const void* partial = in;
  if (in == out && partial_buf.get()) {
    c.copy(partial_buf.get(), in, c.count);
    partial = partial_buf.get();
  }
  std::unique_ptr<Scratch> window;  // the received W, once out holds a result
  bool have_result = false;
  for (int64_t d = 1; d < c.ranks; d *= 2) {
    const int to = c.v + d < c.ranks ? c.real(static_cast<int>(c.v + d)) : -1;
    const int from = c.v - d >= 0 ? c.real(static_cast<int>(c.v - d)) : -1;
    if (from >= 0 && have_result && !window)
      window = std::make_unique<Scratch>(c.workspace, 1, c.tracker, c.bytes(c.count), c.stream);
    void* dst = from < 0 ? nullptr : have_result ? static_cast<void*>(window->get()) : out;
    c.comm.group_begin();
    if (to >= 0) c.comm.send(partial, c.count, c.dtype, to);
    if (from >= 0) c.comm.recv(dst, c.count, c.dtype, from);
    c.comm.group_end();
    if (from < 0) continue;
    if (c.v + 2 * d < c.ranks) {
      c.combine.combine(dst, partial, partial_buf.get(), c.count, c.stream);
      partial = partial_buf.get();
    }
    if (have_result) c.combine.combine(dst, out, out, c.count, c.stream);
    have_result = true;
  }
  if (!have_result) c.combine.fill_identity(out, c.count, c.stream);
}

}  // namespace

ScanWorkspace::~ScanWorkspace() {
  const Stream drained{tracker_.device(), nullptr};  // the owner let the scans' stream drain
  for (int s = 0; s < 2; ++s)
    if (ptr_[s]) device_free(tracker_, ptr_[s], bytes_[s], "scan workspace", &drained);
}

void* ScanWorkspace::buffer(int slot, int64_t bytes, const Stream& stream) {
  PF_REQUIRE(ValueError, slot == 0 || slot == 1, "scan workspace slot " << slot << " (0 or 1)");
  if (bytes_[slot] < bytes) {
    if (ptr_[slot]) device_free(tracker_, ptr_[slot], bytes_[slot], "scan workspace", &stream);
    ptr_[slot] = nullptr;
    bytes_[slot] = 0;
    ptr_[slot] = device_allocate(tracker_, bytes, "scan workspace");
    stream_wait_stream(stream, tracker_.stream());
    bytes_[slot] = bytes;
  }
  return ptr_[slot];
}

void exclusive_scan(Communicator& comm, const void* send, void* recv, int64_t count, const ScanCombine& combine,
                    const ScanOptions& options) {
  PF_REQUIRE(CommError, combine.device() == comm.device(),
             "scan combine '" << combine.name() << "' works on " << combine.device().str()
                              << " but the communicator's buffers are on " << comm.device().str() << " ("
                              << comm_description(comm) << ")");
  PF_REQUIRE(CommError, count >= 0 && count % combine.granule() == 0,
             "scan of " << count << " elements: the combine '" << combine.name()
                        << "' needs a non-negative multiple of " << combine.granule() << " (" << comm_description(comm)
                        << ")");
  PF_REQUIRE(CommError, options.chain_segment_bytes > 0,
             "chain_segment_bytes must be positive, got " << options.chain_segment_bytes);
  if (count == 0) return;

  MemoryTracker local_tracker(comm.device());
  const int ranks = comm.size();
  const bool reverse = options.direction == ScanDirection::Reverse;
  PF_REQUIRE(
      CommError, !options.workspace || options.workspace->device() == comm.device(),
      "scan workspace on " << options.workspace->device().str() << " given for buffers on " << comm.device().str());
  const ScanCall call{comm,
                      combine,
                      options.workspace,
                      options.tracker ? *options.tracker : local_tracker,
                      comm.stream(),
                      combine.dtype(),
                      dtype_size(combine.dtype()),
                      count,
                      ranks,
                      reverse ? ranks - 1 - comm.rank() : comm.rank(),
                      reverse};
  if (ranks == 1) {
    combine.fill_identity(recv, count, call.stream);
    return;
  }
  ScanAlgorithm algorithm = options.algorithm;
  if (algorithm == ScanAlgorithm::Auto)
    algorithm = choose_scan_algorithm(ranks, call.bytes(count), options.chain_segment_bytes);
  switch (algorithm) {
    case ScanAlgorithm::Chain: {
      // Two ranks make one hop: nothing to overlap, so one message.
      const int64_t g = combine.granule();
      const int64_t segment =
          ranks == 2 ? count : std::max<int64_t>(1, options.chain_segment_bytes / call.esize / g) * g;
      scan_chain(call, send, recv, segment);
      break;
    }
    case ScanAlgorithm::Allgather: scan_allgather(call, send, recv); break;
    case ScanAlgorithm::RecursiveDoubling: scan_recursive_doubling(call, send, recv); break;
    case ScanAlgorithm::Auto: break;
  }
}

void reverse_exclusive_scan(Communicator& comm, const void* send, void* recv, int64_t count, const ScanCombine& combine,
                            ScanOptions options) {
  options.direction = ScanDirection::Reverse;
  exclusive_scan(comm, send, recv, count, combine, options);
}

}  // namespace pf
