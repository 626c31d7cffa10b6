// Memory planner: predicts one rank's peak tracked bytes for a training step
// (or a forward-only evaluation) of a config at a local length, before
// running it, from the same buffer inventory the model allocates:
//   persistent   parameters, gradients, two AdamW moments (16 bytes per
//                parameter; 8 without training: the model holds its
//                gradients' buffer either way), the random projections and,
//                with model.dtype bf16/f16, the 16-bit weight copy (2 more
//                bytes per parameter)
//   activations  per layer: LayerNorm outputs and statistics, q/k/v heads,
//                the attention output with its statistics and state, the
//                merged heads, the residual stream, the FFN hidden layer
//                twice (LayerNorm outputs, merged heads and FFN hidden in
//                16 bits under bf16/f16); plus the layer inputs of every layer
//   transient    the largest working set inside one layer's forward or
//                backward (unnormalised outputs, states, scan workspace, the
//                fused FAVOR+ workspace, gradient buffers) and the output head
//                (logits [T, V])
// With activation checkpointing only the layer inputs persist and one layer's
// activations are rebuilt at a time.
#pragma once

#include <cstdint>
#include <string>

#include "model/attention.h"
#include "model/config.h"

namespace pf {

struct MemoryPlan {
  int64_t persistent = 0;       // bytes
  int64_t activations = 0;      // bytes kept across layers at the peak
  int64_t transient = 0;        // bytes of the largest in-layer working set
  int64_t peak = 0;             // predicted peak
  std::string summary() const;  // one line, human readable
};

// `device`: where the step runs (the fused attention's workspace differs);
// `packed`: batches of the packed data mode (a bound that holds for any
// packing); `sp`: the ranks of the sequence group (a local softmax window,
// cfg.window, then takes halo rows from its neighbours and copies each
// piece's rows with them).
MemoryPlan plan_memory(const ModelConfig& cfg, int64_t batch, int64_t n_local, bool training = true,
                       Device device = Device::cpu(), bool packed = false, int64_t sp = 1);

// The largest local length (a multiple of `multiple`) whose planned peak fits
// under 97% of `cap_bytes` (3% headroom), or 0 when even `multiple` does not fit.
int64_t longest_local_length(const ModelConfig& cfg, int64_t batch, int64_t cap_bytes, int64_t multiple = 1024,
                             Device device = Device::cpu(), bool packed = false, int64_t sp = 1);

}  // namespace pf
