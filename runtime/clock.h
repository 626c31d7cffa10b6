// The one clock of the trainer's timings (steps, layers, streams, benchmarks).
#pragma once

namespace pf {

double seconds_now();  // steady (monotonic) clock in seconds, for intervals: its epoch is arbitrary

}  // namespace pf
