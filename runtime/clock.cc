#include "runtime/clock.h"

#include <chrono>

namespace pf {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace pf
