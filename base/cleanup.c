/*
** cleanup.c: the registry of temporary files to remove on a signal
** (contract in rad_cleanup.h).
**
** A fixed table, so the signal handler walks plain memory: no allocation,
** no locks.  A slot is claimed with an atomic exchange and published by its
** `used` flag only after the path is written, so a handler that runs in
** between sees either nothing or the whole path.
*/
#include "rad_cleanup.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define CLEANUP_SLOTS 16
#define CLEANUP_PATH_MAX 4096

static struct {
    atomic_int claimed;         /* 1 while a writer owns the slot */
    volatile int used;          /* the path is complete: remove it on a signal */
    char path[CLEANUP_PATH_MAX];
} slots[CLEANUP_SLOTS];

int rad_cleanup_add(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n >= CLEANUP_PATH_MAX) return -1;
    for (int i = 0; i < CLEANUP_SLOTS; i++) {
        if (atomic_exchange(&slots[i].claimed, 1)) continue;
        memcpy(slots[i].path, path, n + 1);
        atomic_signal_fence(memory_order_seq_cst);
        slots[i].used = 1;
        return i;
    }
    return -1;
}

void rad_cleanup_drop(int slot)
{
    if (slot < 0 || slot >= CLEANUP_SLOTS) return;
    slots[slot].used = 0;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store(&slots[slot].claimed, 0);
}

void rad_cleanup_run(void)
{
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (slots[i].used) unlink(slots[i].path);
}
