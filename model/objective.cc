#include "model/objective.h"

#include "runtime/check.h"
#include "runtime/random.h"

namespace pf {

int64_t ModelInput::predicted() const {
  int64_t c = 0;
  for (int32_t t : targets) c += t >= 0;
  return c;
}

ModelInput make_model_input(const ModelConfig& cfg, const TokenBatch& b, int64_t step) {
  PF_REQUIRE(ValueError, static_cast<int64_t>(b.tokens.size()) == b.batch * b.n &&
                             static_cast<int64_t>(b.lookahead.size()) == b.batch &&
                             static_cast<int64_t>(b.sample_ids.size()) == b.batch,
             "token batch of " << b.batch << " x " << b.n << " has " << b.tokens.size() << " tokens, "
                               << b.lookahead.size() << " lookahead tokens and " << b.sample_ids.size()
                               << " sample ids");
  ModelInput in;
  in.batch = b.batch;
  in.n = b.n;
  in.offset = b.offset;
  in.inputs = b.tokens;
  b.packed.check(b.batch, b.n);
  in.packed = b.packed;
  in.targets.assign(b.tokens.size(), -1);
  const TokenIds& ids = cfg.tokens;
  for (int32_t t : b.tokens)
    PF_REQUIRE(ValueError, t >= 0 && t < cfg.vocab, "token id " << t << " outside the vocabulary of " << cfg.vocab);
  if (cfg.objective == Objective::CausalLM) {
    for (int64_t s = 0; s < b.batch; ++s)
      for (int64_t i = 0; i < b.n; ++i) {
        const int32_t next = i + 1 < b.n ? b.tokens[s * b.n + i + 1] : b.lookahead[s];
        in.targets[s * b.n + i] = (next < 0 || next == ids.pad) ? -1 : next;
      }
    if (!b.packed.empty())
      for (int64_t s = 0; s < b.batch; ++s)
        for (const SequencePiece& p : b.packed.samples[static_cast<size_t>(s)])
          if (p.begin > 0 && !p.joins) in.targets[s * b.n + p.begin - 1] = -1;
    return in;
  }
  const uint32_t threshold = static_cast<uint32_t>(cfg.mlm_probability * 4294967296.0);
  // Rows [begin, end) of sample s keyed by `key`, the first at position `position`.
  auto mask_rows = [&](int64_t s, int64_t begin, int64_t end, uint64_t key, int64_t position) {
    const KeyedRandom rng(cfg.seed ^ 0x6d6c6d5f6d61736bull, static_cast<uint64_t>(step), key);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = s * b.n + i;
      const int32_t tok = b.tokens[t];
      if (tok < ids.first_residue || tok >= ids.first_residue + ids.residues) continue;
      const Philox4 r = rng.draw(static_cast<uint64_t>(position + i - begin));
      if (r.v[0] >= threshold) continue;
      in.targets[t] = tok;
      const double kind = r.v[1] * (1.0 / 4294967296.0);
      if (kind < 0.8) in.inputs[t] = ids.mask;
      else if (kind < 0.9) in.inputs[t] = ids.first_residue + static_cast<int32_t>(r.v[2] % ids.residues);
    }
  };
  for (int64_t s = 0; s < b.batch; ++s) {
    if (b.packed.empty()) {
      mask_rows(s, 0, b.n, b.sample_ids[s], b.offset);
      continue;
    }
    const std::vector<SequencePiece>& pieces = b.packed.samples[static_cast<size_t>(s)];
    for (size_t i = 0; i < pieces.size(); ++i)
      mask_rows(s, pieces[i].begin, pieces[i].begin + b.packed.piece_length(s, i, b.n), pieces[i].key,
                pieces[i].position);
  }
  return in;
}

}  // namespace pf
