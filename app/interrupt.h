/*
** interrupt.h: the one interrupt model of every radiance command
** (radiance(1), EXIT STATUS).
**
** SIGINT (Ctrl-C), SIGTERM (what `timeout` and `kill` send) and SIGHUP (the
** terminal went away) are handled alike:
**
**   - While nothing is running that can stop cleanly (reading flags,
**     resolving, downloading or converting a model, loading it), the first
**     signal removes the partial files writers registered (rad_cleanup.h)
**     and exits with 128 + the signal (130 for SIGINT, 143 for SIGTERM).
**   - While something stoppable runs (a reply), rad_interrupt_arm points the
**     handler at its stop flag: the first signal sets it, the reply stops
**     and keeps what it wrote, and the command finishes its output (run
**     --json still prints its object) before exiting with that status.  A
**     further signal, the `exit_after`-th since arming, exits at once.
**
** The chat front ends arm with exit_after 0 (never) while idle and read
** rad_interrupt_count to decide themselves (an idle Ctrl-C clears the draft
** and says how to leave; a second leaves).  Hooks registered with
** rad_interrupt_on_exit run (async-signal-safe work only: the TUI restores
** the terminal) before any exit from the handler.
*/
#ifndef RAD_INTERRUPT_H
#define RAD_INTERRUPT_H

#include <signal.h>

/* Install the handlers (no SA_RESTART: a read waiting on a terminal or a
** pipe returns EINTR), disarmed. */
void rad_interrupt_install(void);

/* From now on a signal sets *flag (may be NULL) and exits only when it is
** the exit_after-th since this call (0: never from the handler). */
void rad_interrupt_arm(volatile sig_atomic_t *flag, int exit_after);
/* Back to exiting at the first signal. */
void rad_interrupt_disarm(void);

/* Signals received since install, and the last one (0: none). */
int rad_interrupt_count(void);
int rad_interrupt_last(void);
/* The exit status for the first signal received: 128 + its number (130
** for SIGINT, 143 for SIGTERM, 129 for SIGHUP); 130 when none came. */
int rad_interrupt_status(void);

/* Run hook (async-signal-safe) before the handler exits; up to 4 hooks. */
void rad_interrupt_on_exit(void (*hook)(void));

#endif /* RAD_INTERRUPT_H */
