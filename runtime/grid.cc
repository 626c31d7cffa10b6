// ParallelGrid: splits the world into sequence groups (consecutive ranks) and
// data-parallel groups (equal position within their sequence group).
#include "runtime/grid.h"

#include "runtime/check.h"

namespace pf {

ParallelGrid::ParallelGrid(std::unique_ptr<Communicator> world, int sp) : world_(std::move(world)), sp_(sp) {
  PF_REQUIRE(ValueError, world_ != nullptr, "ParallelGrid needs a world communicator");
  const int world_size = world_->size();
  PF_REQUIRE(ValueError, sp >= 1 && world_size % sp == 0,
             "sequence-parallel size sp = " << sp << " must be >= 1 and divide the world size " << world_size
                                            << " (world = dp x sp); e.g. sp = 1"
                                            << (world_size > 1 ? " or sp = " + std::to_string(world_size) : ""));
  dp_ = world_size / sp;
  sp_group_ = world_->split(dp_rank(), sp_rank());
  dp_group_ = world_->split(sp_rank(), dp_rank());
}

}  // namespace pf
