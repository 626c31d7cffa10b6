#include "launch/bench/presets.h"

#include "runtime/check.h"

namespace pf::bench {

std::vector<std::string> model_preset(const std::string& name) {
  if (name == "small")
    return {"model.layers=2", "model.width=128", "model.heads=4", "model.ffn=512", "model.features=64"};
  if (name == "medium")
    return {"model.layers=4", "model.width=256", "model.heads=8", "model.ffn=1024", "model.features=128"};
  if (name == "paper")  // the Performer paper's speed study
    return {"model.layers=6", "model.width=512", "model.heads=8", "model.ffn=2048", "model.features=256"};
  PF_REQUIRE(ConfigError, false, "--preset must be small, medium or paper, got '" << name << "'");
  return {};
}

}  // namespace pf::bench
