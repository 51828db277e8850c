/*
** model_open.c: the loading line and the tokenizer cache folder (see
** model_open.h).
*/
#include "model_open.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* What each stage of rad_engine_open is called on the line. */
static const char *stage_words(const char *stage)
{
    static const struct { const char *stage, *words; } words[] = {
        {"reading", "reading the file"},       {"tokenizer", "preparing the tokenizer"},
        {"plugins", "loading plugins"},        {"planning", "planning memory"},
        {"weights", "preparing the weights"},
    };
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (!strcmp(words[i].stage, stage)) return words[i].words;
    return stage;
}

static void draw(void *arg, const char *stage)
{
    RadModelOpen *m = arg;
    if (!m->tty || !stage) return;
    char line[512];
    int n = snprintf(line, sizeof line, "loading %s: %s ...", m->name, stage_words(stage));
    /* one line: cut to the terminal's width, so it never wraps */
    struct winsize ws;
    if (ioctl(fileno(m->tty), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && n >= ws.ws_col) line[ws.ws_col - 1] = 0;
    fprintf(m->tty, "\r\033[K%s", line);
    fflush(m->tty);
    m->drawn = 1;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *rad_tokenizer_cache_dir(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char *base = NULL, *dir = NULL;
    /* the XDG base directory specification: a relative path is ignored;
    ** a missing folder is made (0700) when its parent exists */
    if (xdg && xdg[0] == '/' && (is_dir(xdg) || mkdir(xdg, 0700) == 0)) {
        if (asprintf(&base, "%s/radiance", xdg) < 0) base = NULL;
    } else if (home && home[0] == '/' && is_dir(home)) {
        char *cache = NULL;
        if (asprintf(&cache, "%s/.cache", home) < 0) return NULL;
        if (mkdir(cache, 0700) != 0 && errno != EEXIST) cache[0] = 0;
        if (cache[0] && asprintf(&base, "%s/radiance", cache) < 0) base = NULL;
        free(cache);
    }
    if (!base) return NULL;
    if ((mkdir(base, 0755) == 0 || errno == EEXIST) && asprintf(&dir, "%s/tokenizers", base) < 0) dir = NULL;
    free(base);
    return dir;
}

void rad_model_open_prepare(RadModelOpen *m, RadEngineOptions *opt, const char *name, int quiet)
{
    memset(m, 0, sizeof *m);
    const char *term = getenv("TERM");
    if (!quiet && isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"))) m->tty = stderr;
    size_t n = name ? strlen(name) : 0;
    /* a long path shows its end, where the file's name is */
    snprintf(m->name, sizeof m->name, "%s%s", n >= sizeof m->name ? "..." : "",
             n >= sizeof m->name ? name + n - (sizeof m->name - 4) : name ? name : "the model");
    m->cache = rad_tokenizer_cache_dir();
    m->opt = opt;
    opt->tokenizer_cache = m->cache;
    opt->progress = draw;
    opt->progress_arg = m;
}

void rad_model_open_done(RadModelOpen *m)
{
    if (m->drawn) {
        fputs("\r\033[K", m->tty);
        fflush(m->tty);
    }
    m->drawn = 0;
    if (m->opt) {
        m->opt->tokenizer_cache = NULL;
        m->opt->progress = NULL;
        m->opt->progress_arg = NULL;
    }
    free(m->cache);
    m->cache = NULL;
}

void rad_model_say_mode(const RadEngine *e, int quiet)
{
    const char *mode = rad_engine_mode(e);
    if (!quiet && mode) fprintf(stderr, "mode: %s\n", mode);
}
