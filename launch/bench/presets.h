// The model shapes the benchmarks share (performer-bench train, generate):
// --set lines for small, medium and paper (the Performer paper's speed study:
// 6 layers, width 512, 8 heads, FFN 2048, m 256).
#pragma once

#include <string>
#include <vector>

namespace pf::bench {

// ConfigError naming the preset when it is not one of them.
std::vector<std::string> model_preset(const std::string& name);

}  // namespace pf::bench
