/*
** interrupt.c: SIGINT, SIGTERM and SIGHUP for every command (the model in
** interrupt.h).  The handler only counts, sets a flag, removes registered
** partial files and exits: everything else happens in the command when it
** sees the flag.
*/
#include "interrupt.h"

#include "../base/rad_cleanup.h"

#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t count, first_signal, last_signal, since_arm, exit_after = 1;
static volatile sig_atomic_t *stop_flag;
static void (*volatile hooks[4])(void);

static void leave(int sig)
{
    for (int i = 0; i < 4; i++)
        if (hooks[i]) hooks[i]();
    rad_cleanup_run();
    _exit(128 + sig);
}

static void on_signal(int sig)
{
    count++;
    if (!first_signal) first_signal = sig;
    last_signal = sig;
    since_arm++;
    if (stop_flag) *stop_flag = 1;
    if (exit_after > 0 && since_arm >= exit_after) leave(first_signal);
}

void rad_interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

void rad_interrupt_arm(volatile sig_atomic_t *flag, int after)
{
    stop_flag = flag;
    since_arm = 0;
    exit_after = after;
}

void rad_interrupt_disarm(void)
{
    stop_flag = NULL;
    since_arm = 0;
    exit_after = 1;
}

int rad_interrupt_count(void) { return count; }
int rad_interrupt_last(void) { return last_signal; }
int rad_interrupt_status(void) { return 128 + (first_signal ? first_signal : SIGINT); }

void rad_interrupt_on_exit(void (*hook)(void))
{
    for (int i = 0; i < 4; i++)
        if (!hooks[i]) {
            hooks[i] = hook;
            return;
        }
}
