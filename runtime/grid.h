// The dp x sp process grid. The world's ranks are split into dp data-parallel
// replicas of sp sequence-parallel ranks each; the ranks of one sequence group
// are consecutive:
//   world_rank = dp_rank * sp + sp_rank
// The sequence group (sp ranks holding consecutive blocks of the same samples,
// scans and sequence allreduces run here) and the data-parallel group (the dp
// ranks with the same sp_rank, gradient allreduces) are communicators split
// from the world, on the world's backend.
#pragma once

#include <memory>

#include "runtime/comm.h"

namespace pf {

class ParallelGrid {
 public:
  // Collective over `world`. Throws ValueError naming the sizes when sp < 1 or
  // the world size is not a multiple of sp.
  ParallelGrid(std::unique_ptr<Communicator> world, int sp);

  Communicator& world() const { return *world_; }
  Communicator& sp_group() const { return *sp_group_; }
  Communicator& dp_group() const { return *dp_group_; }

  int world_size() const { return world_->size(); }
  int world_rank() const { return world_->rank(); }
  int sp_size() const { return sp_; }
  int dp_size() const { return dp_; }
  int sp_rank() const { return world_->rank() % sp_; }
  int dp_rank() const { return world_->rank() / sp_; }

 private:
  std::unique_ptr<Communicator> world_;
  int sp_ = 1;
  int dp_ = 1;
  std::unique_ptr<Communicator> sp_group_;
  std::unique_ptr<Communicator> dp_group_;
};

}  // namespace pf
