#include "runtime/host_allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace pf {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);                     // no block of its own mapping
  mallopt(M_TRIM_THRESHOLD, 0x7fffffff);      // no trimming of the heap's top
#endif
}

}  // namespace pf
