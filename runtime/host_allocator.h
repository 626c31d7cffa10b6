// Process-wide setting of the C library's allocator for the programs that
// train or benchmark (called once at the top of their main):
// keep_freed_host_memory() makes glibc serve every host block from its heap
// and keep freed blocks for reuse instead of returning them to the system.
// Without it, each host tensor above 32 MiB (glibc's largest mmap threshold)
// is a fresh mmap, so every training step page-faults and zeroes its large
// buffers again (about 7 % of a 16,384-token step in `perf`). The process's
// resident memory then stays at its peak; the tracked bytes do not change.
#pragma once

namespace pf {

void keep_freed_host_memory();

}  // namespace pf
