/* common/base/interrupt.h: SIGINT, SIGTERM and SIGHUP as a request to stop at
 * the end of the step (loops see interrupt_pending(), which the step meter
 * checks), the grace of INTERRUPT_GRACE_S by SIGALRM, and exit 128 + the
 * signal: the convention is docs/faults.md's "Signals".  DDP's supervisor
 * handles the signals itself while its ranks run and records them here. */
#ifndef DDPBENCH_INTERRUPT_H
#define DDPBENCH_INTERRUPT_H

#include <stdbool.h>

#define INTERRUPT_GRACE_S 10

/* Install the handler for SIGINT, SIGTERM and SIGHUP, leaving alone any of
 * them that is ignored now. */
void interrupt_install(void);
/* The signal that asked to stop, 0 when none. */
int interrupt_pending(void);
/* The exit status of a run it stopped: 128 + that signal (130 when none is
 * recorded: a stop that came from elsewhere, as an interrupt). */
int interrupt_exit_status(void);
/* Record sig as the request to stop (DDP's supervisor, which took it). */
void interrupt_note(int sig);
/* Follow a stop request another process makes: from now on
 * interrupt_pending() also returns *flag when it is set (read atomically):
 * DDP's ranks follow their supervisor's flag in the shared segment. */
void interrupt_follow(const int *flag);
/* Block (true) or unblock SIGINT, SIGTERM and SIGHUP in this thread: around
 * a write that a signal's default action must not cut in half (a rank's
 * checkpoint); a signal that came meanwhile is delivered on unblocking. */
void interrupt_hold(bool hold);
/* Is sig ignored now (an inherited SIG_IGN that every handler must honour)? */
bool interrupt_ignored(int sig);

#endif
