/*
** rad_cleanup.h: files a process must not leave behind if a signal stops it.
**
** A writer that builds a file under a temporary name (a .rad being
** converted: OUT.rad.partial.XXXXXX) registers the name while it writes and
** drops it once the file is renamed into place or removed.  The app's
** interrupt module (app/interrupt.c) calls rad_cleanup_run from its signal
** handler before it exits, so Ctrl-C or SIGTERM during a conversion leaves
** nothing half-written.  SIGKILL cannot be caught: for that, writers also
** hold a lock on their temporary file, and the next writer of the same
** output sweeps temporaries whose lock nobody holds (rad_container.h).
**
** It lives in base/ because the writers sit in formats/ and engine/, which
** may not call into the app.
*/
#ifndef RAD_CLEANUP_H
#define RAD_CLEANUP_H

/* Register path (copied).  Returns a slot >= 0, or -1 when every slot is
** taken or the path is too long (the file is then not removed on a signal;
** the stale-partial sweep still finds it). */
int rad_cleanup_add(const char *path);
/* The file of slot was finished or removed: forget it.  -1 is a no-op. */
void rad_cleanup_drop(int slot);
/* Remove every registered file.  Async-signal-safe (unlink only). */
void rad_cleanup_run(void);

#endif /* RAD_CLEANUP_H */
