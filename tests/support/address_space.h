// A cap on the address space of the calling process, for tests that prove
// a reader refuses a file before it allocates what the file declares: the
// cap is what the process maps now plus `headroom`, so it holds the same
// way whatever the process mapped before (an AddressSanitizer build maps
// terabytes of shadow memory at start).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace pf::test {

// Bytes of address space this process maps now (/proc/self/statm).
inline int64_t address_space_now() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0;
  in >> pages;
  return pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// RLIMIT_AS = address_space_now() + headroom, soft and hard; false if refused.
inline bool cap_address_space(int64_t headroom) {
  const auto cap = static_cast<rlim_t>(address_space_now() + headroom);
  const rlimit limit{cap, cap};
  return ::setrlimit(RLIMIT_AS, &limit) == 0;
}

}  // namespace pf::test
