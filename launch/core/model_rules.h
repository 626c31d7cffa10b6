// Which models a configuration, a launch or a checkpoint may be run with, one
// function per rule, each called by every tool the rule concerns. A refusal
// is a ConfigError that names the keys (and the checkpoint) and what to
// change.
//   attends_to_every_key        exact softmax without a local window: the
//                               fact the rules on sequence splits and on a
//                               state of bounded size are made of.
//   require_softmax_on_one_rank     such a model keeps the whole sequence on
//                               one rank (training, performer-eval, the
//                               inference tools).
//   require_window_within_neighbour a rank's window reaches only into its
//                               neighbour's rows (the same).
//   validate_training_window    training only: model.window <= data.sample_length.
//   model_incompatibilities, require_same_model, require_loadable_model
//                               what a checkpoint's model must share with the
//                               model it resumes (every key that changes the
//                               function) or loads its parameters into (all
//                               but the keys that choose how attention is
//                               computed: checkpoint.init_from, performer-eval,
//                               -score, -embed, -generate; the tensors one
//                               kind lacks are carried by carry_parameters,
//                               model/params.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch/core/train_config.h"
#include "model/config.h"

namespace pf {

// model.attention = softmax with model.window = 0: every position attends to
// every key of its sequence, so the sequence cannot be split over ranks and
// no state of bounded size stands for a prefix (a context, a prompt).
bool attends_to_every_key(const ModelConfig& model);

// Who splits a sequence over `ranks` ranks, for the words of a refusal: a
// run's configuration (parallel.sp: training, performer-eval), or an
// inference tool running `checkpoint` on the ranks it was launched with.
struct SequenceSplit {
  int64_t ranks = 1;
  std::string checkpoint;  // "": parallel.sp of a run's configuration
};

// A model that attends to every key runs on one rank.
void require_softmax_on_one_rank(const ModelConfig& model, const SequenceSplit& split);
// A local window (model.window) on split.ranks > 1 reaches model.window - 1
// rows back, at most into the neighbour's: model.window - 1 <= the rows of a
// rank, sample_length / ranks (data.sample_length: a training sample; an
// inference tool pads a short protein to that many rows, so a longer window
// would make the padding, not the proteins, the allocation size).
void require_window_within_neighbour(const ModelConfig& model, int64_t sample_length, const SequenceSplit& split);
// Training only: model.window <= data.sample_length (a longer window reaches
// positions no sample has; the inference tools hold window rows by the
// tokens they run, so a checkpoint's window is never an allocation size).
void validate_training_window(const TrainConfig& cfg);

// Differences between two model configurations that change the function a
// checkpoint computes ("model.width: 128 in the checkpoint, 256 now"); empty
// when compatible. chunk and activation checkpointing may differ. With
// attention_may_differ, the keys that choose how attention is computed from
// the same parameters (attention, features, redraw_interval, projection,
// feature_scaling, feature_draw) are not compared: loading the parameters of a
// softmax model into a FAVOR+ or exp one (exp's projections then start as
// FAVOR+'s draw: carry_parameters), or evaluating with other random
// features. Between two exp models the features and exp_key_norm are
// compared (the projections are trained parameters).
std::vector<std::string> model_incompatibilities(const ModelConfig& stored, const ModelConfig& current,
                                                 bool attention_may_differ = false);
// A resume continues the model that wrote checkpoint `path`: `stored` (its
// stored configuration) and `current` differ in no key of
// model_incompatibilities. ConfigError "<path>: checkpoint is from an
// incompatible model configuration:" with, one per line, each key and both
// values.
void require_same_model(const std::string& path, const ModelConfig& stored, const ModelConfig& current);
// The parameters of checkpoint `path` load into `current`: they differ in no
// key but those that choose how attention is computed (attention_may_differ).
// ConfigError "<path>: cannot load these parameters into this model:" with
// each key.
void require_loadable_model(const std::string& path, const ModelConfig& stored, const ModelConfig& current);

}  // namespace pf
