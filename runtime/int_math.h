// Integer helpers shared by host code, CUDA kernels and the kernels' headers
// that also run under the block emulator of the tests.
#pragma once

#include <cstdint>

namespace pf {

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace pf
