/*
** chat_history.c: the input history both chat front ends share, kept with
** readline's history library so line mode gets readline's own recall and
** search, and persisted in $XDG_STATE_HOME/radiance/history (default
** ~/.local/state/radiance/history: history is state, not data the user
** would back up; the XDG spec names that directory for exactly this).
**
** Entries are appended to the file as they are made, so two chats running
** at once both keep theirs, and a crash loses nothing.  The file holds one
** entry per line; a message's own newlines are stored as U+001E (record
** separator), which no one types, and turned back when an entry is read.
*/
#include "../tui/tui.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline/history.h>

#define HISTORY_KEEP 2000

static char history_file[PATH_MAX];
static int history_ready;

/* mkdir -p for the directories above path. */
static void make_parents(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) return;
        *p = '/';
    }
}

const char *rad_history_path(void)
{
    if (history_file[0]) return history_file;
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (state && state[0] == '/') snprintf(history_file, sizeof history_file, "%s/radiance/history", state);
    else if (home && home[0]) snprintf(history_file, sizeof history_file, "%s/.local/state/radiance/history", home);
    else return NULL;
    return history_file;
}

void rad_history_open(void)
{
    if (history_ready) return;
    history_ready = 1;
    using_history();
    const char *path = rad_history_path();
    if (!path) return;
    make_parents(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    read_history(path);
}

void rad_history_add(const char *line)
{
    if (!history_ready) rad_history_open();
    if (!line || !line[0]) return;
    char *enc = strdup(line);
    if (!enc) return;
    for (char *p = enc; *p; p++)
        if (*p == '\n') *p = '\x1e';
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (!last || strcmp(last->line, enc)) {
        add_history(enc);
        const char *path = rad_history_path();
        if (path) append_history(1, path);
    }
    free(enc);
}

int rad_history_count(void)
{
    return history_length;
}

char *rad_history_get(int i)
{
    HIST_ENTRY *h = i >= 0 && i < history_length ? history_get(history_base + i) : NULL;
    char *line = h ? strdup(h->line) : NULL;
    for (char *p = line; p && *p; p++)
        if (*p == '\x1e') *p = '\n';
    return line;
}

void rad_history_close(void)
{
    const char *path = rad_history_path();
    if (history_ready && path) history_truncate_file(path, HISTORY_KEEP);
}
