// SIGTERM / SIGINT (cluster preemption, Ctrl-C) ask the training loop to stop:
// the handler only records the request; the loop agrees on it across ranks
// (an allreduce of the flag each step), saves a checkpoint and exits cleanly.
// The flag is the one piece of process-wide state in the trainer: a signal
// handler can reach nothing else.
#pragma once

namespace pf {

void install_stop_handlers();
bool stop_requested();
int stop_signal_number();  // the signal received, 0 when none

}  // namespace pf
