/*
** cli.c: the helpers every command shares at its edge (contract in cli.h):
** checked output, atomic output files, terminal-safe text, JSON, the clock
** and the words of a command line.
*/
#include "cli.h"

#include "app.h"
#include "models/model_spec.h"
#include "../base/rad_cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

/* ------------------------------------------------------------ output */

int rad_out_check(FILE *f, const char *what)
{
    errno = 0;
    int flushed = fflush(f) == 0;
    int err = errno;
    if (flushed && !ferror(f)) return RAD_OK;
    if (!err) {
        /* A write failed earlier and its reason is gone; ask the file. */
        struct stat st;
        err = fstat(fileno(f), &st) != 0 ? errno : EIO;
    }
    return rad_error_set(RAD_E_IO, "writing %s: %s", what, strerror(err));
}

int rad_out_finish(int status)
{
    int rc = rad_out_check(stdout, "standard output");
    if (rc == RAD_OK && fclose(stdout) != 0)
        rc = rad_error_set(RAD_E_IO, "writing standard output: %s", strerror(errno));
    if (rc == RAD_OK) return status;
    /* A command that failed has said why already (one line per failure). */
    if (status != RAD_EXIT_OK) return status;
    fprintf(stderr, "radiance: %s\n", rad_error_message());
    return RAD_EXIT_FAILURE;
}

int rad_outfile_open(RadOutFile *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        /* A device or a pipe: written in place (a rename would replace it). */
        if (!(o->path = strdup(path))) return rad_error_set(RAD_E_NOMEM, "out of memory");
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
            int rc = rad_error_set(RAD_E_IO, "%s: cannot write: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            free(o->path);
            o->path = NULL;
            return rc;
        }
        return RAD_OK;
    }
    if (asprintf(&o->tmp, "%s.partial.XXXXXX", path) < 0 || !(o->path = strdup(path))) {
        free(o->tmp);
        o->tmp = NULL;
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int rc = rad_error_set(RAD_E_IO, "%s: cannot write: %s", path, strerror(errno));
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        o->slot = -1;
        return rc;
    }
    o->slot = rad_cleanup_add(o->tmp);
    if (!(o->f = fdopen(fd, "w"))) {
        close(fd);
        int rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        rad_outfile_abort(o);
        return rc;
    }
    return RAD_OK;
}

int rad_outfile_commit(RadOutFile *o)
{
    int rc = rad_out_check(o->f, o->path);
    if (!o->tmp) {                      /* written in place */
        if (fclose(o->f) != 0 && !rc) rc = rad_error_set(RAD_E_IO, "writing %s: %s", o->path, strerror(errno));
        o->f = NULL;
        free(o->path);
        o->path = NULL;
        return rc;
    }
    /* mkstemp makes the file 0600; give it what a plain fopen would. */
    mode_t mask = umask(0);
    umask(mask);
    if (!rc && fchmod(fileno(o->f), 0666 & ~mask) != 0)
        rc = rad_error_set(RAD_E_IO, "writing %s: %s", o->path, strerror(errno));
    if (!rc && fsync(fileno(o->f)) != 0 && errno != EINVAL)
        rc = rad_error_set(RAD_E_IO, "writing %s: %s", o->path, strerror(errno));
    int closed = fclose(o->f);
    o->f = NULL;
    if (!rc && closed != 0) rc = rad_error_set(RAD_E_IO, "writing %s: %s", o->path, strerror(errno));
    if (!rc && rename(o->tmp, o->path) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: cannot move the finished file into place: %s", o->path, strerror(errno));
    if (rc) {
        rad_outfile_abort(o);
        return rc;
    }
    rad_cleanup_drop(o->slot);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    o->slot = -1;
    return RAD_OK;
}

void rad_outfile_abort(RadOutFile *o)
{
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    rad_cleanup_drop(o->slot);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    o->slot = -1;
}

/* ------------------------------------------------------------ terminal safety */

typedef struct Grow {
    char *p;
    size_t n, cap;
    int failed;
} Grow;

static void grow_add(Grow *g, const char *s, size_t n)
{
    if (g->failed) return;
    if (g->n + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 64;
        while (cap < g->n + n + 1) cap *= 2;
        char *p = realloc(g->p, cap);
        if (!p) {
            g->failed = 1;
            return;
        }
        g->p = p;
        g->cap = cap;
    }
    memcpy(g->p + g->n, s, n);
    g->n += n;
    g->p[g->n] = 0;
}

char *rad_safe_text(const char *s, size_t n, int flags)
{
    Grow g = {0};
    grow_add(&g, "", 0);
    size_t i = 0, plain = 0;
    while (i < n) {
        char esc[RAD_SAFE_ESC_MAX];
        size_t used;
        int len = rad_safe_escape(s + i, n - i, flags, &used, esc);
        if (len > 0) {
            grow_add(&g, s + plain, i - plain);
            grow_add(&g, esc, (size_t)len);
            plain = i + used;
        }
        i += used;
    }
    grow_add(&g, s + plain, n - plain);
    if (g.failed) {
        free(g.p);
        return NULL;
    }
    return g.p;
}

void rad_safe_fwrite(FILE *f, const char *s, size_t n, int flags)
{
    if (!n) return;
    char *safe = rad_safe_text(s, n, flags);
    if (safe) fputs(safe, f);
    free(safe);
}

static const char *safe_ring(const char *s, int flags)
{
    static char *ring[8];
    static int next;
    if (!s) return "";
    char *safe = rad_safe_text(s, strlen(s), flags);
    if (!safe) return "(out of memory)";
    free(ring[next]);
    ring[next] = safe;
    next = (next + 1) % 8;
    return safe;
}

const char *rad_safe(const char *s) { return safe_ring(s, RAD_SAFE_LINE); }
const char *rad_safe_multiline(const char *s) { return safe_ring(s, RAD_SAFE_TEXT); }

int rad_text_columns(const char *s)
{
    int cols = 0;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t got = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (got <= 0) {
            cols++;
            i++;
            continue;
        }
        int w = utf8proc_charwidth(cp);
        cols += w > 0 ? w : 0;
        i += (size_t)got;
    }
    return cols;
}

/* ------------------------------------------------------------ JSON */

json_t *rad_json_f32(float v)
{
    char buf[32];
    if (!isfinite(v)) return json_null();
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return json_real(strtod(buf, NULL));
}

json_t *rad_json_ms(double v)
{
    if (!isfinite(v)) return json_null();
    return json_real(round(v * 1000.0) / 1000.0);
}

int rad_json_print(json_t *j, FILE *f)
{
    int rc = RAD_OK;
    if (!j) return rad_error_set(RAD_E_NOMEM, "out of memory");
    if (json_dumpf(j, f, JSON_COMPACT | JSON_REAL_PRECISION(15)) != 0 || fputc('\n', f) == EOF)
        rc = RAD_E_IO;
    json_decref(j);
    int checked = rad_out_check(f, f == stdout ? "standard output" : "the output");
    return checked ? checked : rc ? rad_error_set(RAD_E_IO, "writing the JSON output failed") : RAD_OK;
}

/* ------------------------------------------------------------ the rest */

double rad_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

const char *rad_model_display_name(const char *spec, char *buf, size_t cap)
{
    if (!spec || !spec[0]) {
        if (cap) buf[0] = 0;
        return buf;
    }
    const char *slash = strrchr(spec, '/');
    if (starts_with(spec, "hf:") || starts_with(spec, "hf.co/") || !slash || !slash[1]) snprintf(buf, cap, "%s", spec);
    else snprintf(buf, cap, "%s", slash + 1);
    return buf;
}

int rad_word_is_model(const char *word)
{
    if (!word || !word[0]) return 0;
    for (const char *p = word; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n') return 0;
    if (starts_with(word, "hf:") || starts_with(word, "hf.co/")) return 1;
    if (strchr(word, '/') || ends_with(word, ".gguf") || ends_with(word, ".rad")) return 1;
    struct stat st;
    if (stat(word, &st) == 0) return 1;
    RadModelSpec *spec = calloc(1, sizeof *spec);
    int is = spec && rad_model_spec_parse(word, spec) == RAD_OK;
    free(spec);
    rad_error_clear();
    return is;
}
