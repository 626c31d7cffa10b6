// Distributed exclusive scans of one block per rank, over any Communicator.
//
// Each rank r of P contributes a buffer T_r of `count` elements; with an
// associative combine (x, y) -> x . y that need not be commutative:
//   Forward: out_r = T_0 . T_1 . ... . T_{r-1}        (rank 0 gets the identity)
//   Reverse: out_r = T_{P-1} . T_{P-2} . ... . T_{r+1} (rank P-1 gets the identity)
// Reverse is the Forward scan over the ranks relabelled r -> P-1-r, so in both
// directions the combine's `earlier` operand is the one met first by the scan
// (a lower rank going forward, a higher rank in reverse). For a sum this is the
// prefix sum (forward) and the suffix sum (reverse) of the block totals.
//
// Algorithms (costs for n bytes per rank, latency a, inverse bandwidth b,
// combine cost g per byte; docs/comm.md has the measurements):
//   Chain              P-1 hops, pipelined in segments of S bytes:
//                      (P-2 + n/S)(a + S b) + n g: bandwidth-optimal for large n.
//   Allgather          every block total to every rank, combined locally in
//                      scan order: allgather(n) + (P-2) n g; few rounds, P n memory.
//   RecursiveDoubling  ceil(log2 P) rounds for any P (Hillis-Steele with
//                      distance-2^k exchanges): ceil(log2 P)(a + n b + 2 n g).
//   Auto               chosen from P and n by choose_scan_algorithm().
// In place is allowed (send == recv). Buffers live on comm.device(); the
// combine's work and every copy run on comm.stream(), so the scan is ordered
// like the communicator's own operations: the caller makes comm.stream() wait
// for the stream that wrote `send`, and waits for comm.stream() before using
// `recv` elsewhere (see the completion rules in runtime/comm.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/memory.h"

namespace pf {

// An associative operation on buffers of `count` elements of dtype() that live
// on device(). `count` is always a multiple of granule() (the number of
// elements the combine treats as one value, e.g. 4 for 2x2 matrices).
class ScanCombine {
 public:
  virtual ~ScanCombine() = default;
  virtual DType dtype() const = 0;
  virtual Device device() const = 0;
  virtual int64_t granule() const { return 1; }
  virtual const char* name() const = 0;
  // out = the identity of the combine.
  virtual void fill_identity(void* out, int64_t count, const Stream& stream) const = 0;
  // out = earlier . later; `out` may alias either input.
  virtual void combine(const void* earlier, const void* later, void* out, int64_t count,
                       const Stream& stream) const = 0;
};

class ScanWorkspace;

// Elementwise sum (identity 0) of f32, f64 or i64 on `device` (the host, or a
// CUDA device in builds with the CUDA backend).
std::unique_ptr<ScanCombine> make_sum_combine(DType dtype, Device device = Device::cpu());

// The segmented form of `inner` (which must outlive it): every inner value
// (granule g) is preceded by a flag, 0 or 1 in the same dtype (granule g + 1),
// meaning "a segment starts in this block", and
//   (A, f) (+) (B, h) = (h ? B : A (+) B, f or h)      identity (0, inner's)
// which is associative, so every algorithm below computes, for each rank,
// the combine of the blocks since the last flagged one before it (the
// earlier ranks' flags or'ed into the flag): a forward scan stops at the
// last segment start before the rank, a reverse scan at the next one after
// it. Each combine takes granules x g elements of scratch from slot 0 of
// `scratch` (on inner's device; not the scan's own workspace), on the scan's
// stream: keep it as ScanWorkspace says.
std::unique_ptr<ScanCombine> make_segmented_combine(const ScanCombine& inner, ScanWorkspace& scratch);

enum class ScanDirection { Forward, Reverse };
enum class ScanAlgorithm { Auto, Chain, Allgather, RecursiveDoubling };

const char* scan_direction_name(ScanDirection direction);
const char* scan_algorithm_name(ScanAlgorithm algorithm);     // "auto", "chain", "allgather", "recursive_doubling"
ScanAlgorithm parse_scan_algorithm(const std::string& name);  // throws ValueError naming the text

// Scratch memory for scans, kept between calls (a scan per layer and step
// would otherwise allocate and free, which on CUDA also synchronises). Grows
// to the largest request; freed on destruction. Holds at most two buffers.
// Not thread safe: one workspace per stream of scans. Destroy it only after
// the stream of the last scan that used it has drained.
class ScanWorkspace {
 public:
  explicit ScanWorkspace(MemoryTracker& tracker) : tracker_(tracker) {}
  ~ScanWorkspace();
  ScanWorkspace(const ScanWorkspace&) = delete;
  ScanWorkspace& operator=(const ScanWorkspace&) = delete;
  Device device() const { return tracker_.device(); }
  // Buffer `slot` (0 or 1) of at least `bytes`; previous contents are lost
  // when it grows (after draining `stream`, which may still use the old one).
  void* buffer(int slot, int64_t bytes, const Stream& stream);
  int64_t bytes() const { return bytes_[0] + bytes_[1]; }

 private:
  MemoryTracker& tracker_;
  void* ptr_[2] = {nullptr, nullptr};
  int64_t bytes_[2] = {0, 0};
};

struct ScanOptions {
  ScanDirection direction = ScanDirection::Forward;
  ScanAlgorithm algorithm = ScanAlgorithm::Auto;
  // The chain algorithm pipelines messages in segments of about this many bytes.
  int64_t chain_segment_bytes = int64_t{1} << 20;
  // Scratch memory comes from here when given (recommended for repeated
  // scans); otherwise each call allocates it, accounted in `tracker` when
  // given (an uncapped local tracker otherwise), and frees it before
  // returning, after draining comm.stream() on CUDA.
  ScanWorkspace* workspace = nullptr;
  MemoryTracker* tracker = nullptr;
};

// The algorithm Auto runs for P ranks and `bytes` per rank (the same on every
// rank, so every rank of a group picks the same one): the chain up to 8 ranks
// (measured), beyond that recursive doubling while
// bytes * (ceil(log2 P) - 1) < (P - 2) * chain_segment_bytes (cost model),
// else the chain. See docs/comm.md.
ScanAlgorithm choose_scan_algorithm(int ranks, int64_t bytes, int64_t chain_segment_bytes = int64_t{1} << 20);

// out_r as above, for `count` elements of combine.dtype() per rank. Collective
// over `comm`: every rank calls it with the same count, combine and options.
void exclusive_scan(Communicator& comm, const void* send, void* recv, int64_t count, const ScanCombine& combine,
                    const ScanOptions& options = {});

// Shorthand for options.direction = Reverse.
void reverse_exclusive_scan(Communicator& comm, const void* send, void* recv, int64_t count, const ScanCombine& combine,
                            ScanOptions options = {});

}  // namespace pf
