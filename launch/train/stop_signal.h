// SIGTERM / SIGINT (cluster preemption, Ctrl-C) ask a long-running tool to
// stop: the handler only records the signal. The training loop agrees on it
// across ranks (an allreduce of the signal number each step, so that rank 0
// can name a signal that another rank received), saves a checkpoint and exits
// cleanly; `performer-data prepare` removes its temporary file and exits with
// 128 + the signal.
// The flag is the one piece of process-wide state in the trainer: a signal
// handler can reach nothing else.
#pragma once

namespace pf {

void install_stop_handlers();
bool stop_requested();
int stop_signal_number();  // the signal received, 0 when none

}  // namespace pf
