// Evaluation of a model on a split of prepared data (performer-train's
// validation, performer-eval).
//   run_validation   the first eval_batches batches of the config's
//                    validation split (all batches when 0: the same for
//                    every layout; a batch is dp x batch_size samples, so
//                    eval_batches > 0 scores more samples with more
//                    data-parallel groups; in packed and family modes the
//                    split is packed in an order keyed by data.seed). With `by_length` (data.mode
//                    single, packed or family, where every position belongs
//                    to one protein) also the sums per protein length bucket:
//                    kLengthBuckets entries, proteins of at most
//                    kLengthEdges[0] residues, up to kLengthEdges[1], longer.
//                    With `stop`, polled by every rank before each batch and
//                    agreed over the session's ranks (so all stop at the same
//                    batch): EvalStopped once it returns true on any rank.
//   run_context_gain family mode: the same batches scored twice, each member
//                    after the relatives before it in its family context and
//                    each member on its own (LoaderOptions::members_alone),
//                    with the sums per number of relatives before a member
//                    (kRelativeBuckets: 0, 1, 2-3, 4-7, 8 or more). The
//                    buckets count the targets both passes predict: every
//                    token of a member but its first residue, which only a
//                    context predicts (from the <end> before it); the totals
//                    count every target of their pass.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launch/core/session.h"
#include "launch/core/train_config.h"
#include "model/trainer.h"

namespace pf {

constexpr int64_t kLengthEdges[2] = {1024, 8192};
constexpr int kLengthBuckets = 3;
int length_bucket(int64_t residues);
// "<= 1024 residues", "1025-8192 residues", "> 8192 residues".
std::string length_bucket_name(int bucket);

constexpr int kRelativeBuckets = 5;
int relatives_bucket(int64_t relatives);
// "0", "1", "2-3", "4-7", "8+".
std::string relatives_bucket_name(int bucket);

// With `cropped` (and `by_length`): per length bucket, the tokens scored of
// proteins longer than a sample (more than data.sample_length tokens with
// their <end>), which count one crop each, not the whole protein.
EvalStats run_validation(const TrainConfig& cfg, Session& session, Trainer& trainer,
                         std::vector<EvalStats>* by_length = nullptr, const std::function<bool()>& stop = {},
                         std::vector<int64_t>* cropped = nullptr);

// run_validation ended by its `stop` (performer-eval's SIGINT / SIGTERM).
class EvalStopped : public Error {
 public:
  explicit EvalStopped(const std::string& what) : Error(ErrorKind::Io, what) {}
};

struct ContextGain {
  EvalStats context, alone;                              // every target of each pass
  std::vector<EvalStats> context_by, alone_by;           // [kRelativeBuckets]
  // Nats per token that the relatives save in bucket b (alone - context); 0 when it is empty.
  double gain(int b) const;
};
ContextGain run_context_gain(const TrainConfig& cfg, Session& session, Trainer& trainer);

}  // namespace pf
