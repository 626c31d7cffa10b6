// Evaluation on a split of prepared data: see evaluation.h.
#include "launch/train/evaluation.h"

#include <algorithm>

#include "data/loader.h"
#include "runtime/check.h"
#include "runtime/comm.h"

namespace pf {

int length_bucket(int64_t residues) { return residues <= kLengthEdges[0] ? 0 : residues <= kLengthEdges[1] ? 1 : 2; }

std::string length_bucket_name(int bucket) {
  if (bucket == 0) return "<= " + std::to_string(kLengthEdges[0]) + " residues";
  if (bucket == 1) return std::to_string(kLengthEdges[0] + 1) + "-" + std::to_string(kLengthEdges[1]) + " residues";
  return "> " + std::to_string(kLengthEdges[1]) + " residues";
}

int relatives_bucket(int64_t relatives) {
  return relatives <= 1 ? static_cast<int>(relatives) : relatives <= 3 ? 2 : relatives <= 7 ? 3 : 4;
}

std::string relatives_bucket_name(int bucket) {
  static const char* const names[kRelativeBuckets] = {"0", "1", "2-3", "4-7", "8+"};
  return names[bucket];
}

double ContextGain::gain(int b) const {
  const EvalStats& c = context_by[static_cast<size_t>(b)];
  const EvalStats& a = alone_by[static_cast<size_t>(b)];
  return c.tokens && a.tokens ? a.loss() - c.loss() : 0.0;
}

namespace {

// The group of each position of a batch by its segment (-1: padding):
// `group(segment)` for the proteins of packed and family samples,
// `sample_group(info)` for the sample's protein otherwise.
template <typename GroupOf, typename SampleGroupOf>
std::vector<int32_t> segment_groups(const Batch& b, const DataLoader& loader, GroupOf group,
                                    SampleGroupOf sample_group) {
  std::vector<int32_t> g(b.tokens.size(), -1);
  for (int64_t r = 0; r < b.batch_size; ++r) {
    int32_t* row = g.data() + r * b.slice_length;
    const SampleInfo& info = b.samples[static_cast<size_t>(r)];
    if (!info.valid) continue;
    if (!packs_proteins(loader.options().mode)) {
      std::fill(row, row + b.slice_length, sample_group(info));
      continue;
    }
    const std::vector<SliceSegment>& segs = b.segments[static_cast<size_t>(r)];
    for (size_t k = 0; k < segs.size(); ++k) {
      if (segs[k].protein < 0) continue;
      const int64_t end = k + 1 < segs.size() ? segs[k + 1].begin : b.slice_length;
      std::fill(row + segs[k].begin, row + end, group(segs[k]));
    }
  }
  return g;
}

void add(EvalStats& total, const EvalStats& e) {
  total.loss_sum += e.loss_sum;
  total.tokens += e.tokens;
  total.correct += e.correct;
}

int64_t batches_to_run(const TrainConfig& cfg, const DataLoader& loader) {
  return cfg.run.eval_batches > 0 ? std::min(cfg.run.eval_batches, loader.steps_per_epoch())
                                  : loader.steps_per_epoch();
}

}  // namespace

EvalStats run_validation(const TrainConfig& cfg, Session& session, Trainer& trainer, std::vector<EvalStats>* by_length,
                         const std::function<bool()>& stop, std::vector<int64_t>* cropped) {
  LoaderOptions o = loader_options(cfg, session.grid(), cfg.data.valid_split, LoaderUse::Evaluation);
  o.prefetch = 0;
  DataLoader loader(o);
  PF_REQUIRE(ConfigError, by_length == nullptr || cfg.data.mode != SampleMode::Concat,
             "perplexity by protein length needs data.mode = \"packed\", \"family\" or \"single\" (in concat "
             "mode a sample runs across proteins)");
  if (by_length) by_length->assign(kLengthBuckets, EvalStats{});
  if (cropped) cropped->assign(kLengthBuckets, 0);
  // Groups 2 b and 2 b + 1: bucket b, proteins that fit a sample and longer ones.
  const int64_t L = cfg.data.sample_length;
  const auto by_protein_length = [&loader, L](const SliceSegment& s) {
    const int64_t tokens = loader.protein_tokens(s.protein);
    return 2 * length_bucket(tokens - 1) + (tokens > L ? 1 : 0);
  };
  const auto by_sample_length = [L](const SampleInfo& info) {
    return 2 * length_bucket(info.source_length) + (info.source_length + 1 > L ? 1 : 0);
  };
  std::vector<EvalStats> split_groups(2 * kLengthBuckets);
  EvalStats total;
  const int64_t batches = batches_to_run(cfg, loader);
  for (int64_t i = 0; i < batches; ++i) {
    if (stop) {
      int stopped = stop() ? 1 : 0;
      allreduce_host_values(session.grid().world(), &stopped, 1, DType::i32, ReduceOp::Max, session.tracker());
      if (stopped) throw EvalStopped("evaluation stopped before batch " + std::to_string(i + 1) + " of " +
                                     std::to_string(batches));
    }
    const Batch batch = loader.next();
    std::vector<int32_t> groups;
    if (by_length) groups = segment_groups(batch, loader, by_protein_length, by_sample_length);
    add(total, trainer.evaluate(to_token_batch(batch, session.grid()), by_length ? &groups : nullptr, &split_groups));
  }
  if (by_length)
    for (int b = 0; b < kLengthBuckets; ++b) {
      add((*by_length)[static_cast<size_t>(b)], split_groups[static_cast<size_t>(2 * b)]);
      add((*by_length)[static_cast<size_t>(b)], split_groups[static_cast<size_t>(2 * b + 1)]);
      if (cropped) (*cropped)[static_cast<size_t>(b)] = split_groups[static_cast<size_t>(2 * b + 1)].tokens;
    }
  return total;
}

ContextGain run_context_gain(const TrainConfig& cfg, Session& session, Trainer& trainer) {
  PF_REQUIRE(ConfigError, cfg.data.mode == SampleMode::Family,
             "the context gain needs data.mode = \"family\", got \"" << sample_mode_name(cfg.data.mode) << "\"");
  LoaderOptions o = loader_options(cfg, session.grid(), cfg.data.valid_split, LoaderUse::Evaluation);
  o.prefetch = 0;
  DataLoader with_context(o);
  o.members_alone = true;
  DataLoader alone(o);
  ContextGain g;
  g.context_by.assign(kRelativeBuckets, EvalStats{});
  g.alone_by.assign(kRelativeBuckets, EvalStats{});
  const auto by_relatives = [](const SliceSegment& s) { return relatives_bucket(s.relatives); };
  const int64_t batches = batches_to_run(cfg, with_context);
  for (int64_t i = 0; i < batches; ++i) {
    const Batch c = with_context.next(), a = alone.next();
    std::vector<int32_t> groups =
        segment_groups(c, with_context, by_relatives, [](const SampleInfo&) -> int32_t { return -1; });
    // Leave out the rows whose target is a member's first residue: the row
    // before a member that joins, here or (through the lookahead) on the next rank.
    for (int64_t r = 0; r < c.batch_size; ++r) {
      int32_t* row = groups.data() + r * c.slice_length;
      for (const SliceSegment& s : c.segments[static_cast<size_t>(r)])
        if (s.joins && s.begin > 0) row[s.begin - 1] = -1;
      if (c.lookahead[static_cast<size_t>(r)] != a.lookahead[static_cast<size_t>(r)]) row[c.slice_length - 1] = -1;
    }
    add(g.context, trainer.evaluate(to_token_batch(c, session.grid()), &groups, &g.context_by));
    add(g.alone, trainer.evaluate(to_token_batch(a, session.grid()), &groups, &g.alone_by));
  }
  return g;
}

}  // namespace pf
