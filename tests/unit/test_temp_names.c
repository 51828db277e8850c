/*
** test_temp_names.c: every temporary file radiance writes has a name nobody
** can guess and is created exclusively, so a name guessed or planted in a
** shared folder never becomes a write elsewhere (issue 12, item 2: "temp
** names like *.tmp.PID are predictable").
**
** The writers with temporaries: rad_sfs_write_file (the Hugging Face cache
** and the model store, app/models/safe_fs.c), rad_tokcache_put (the
** tokenizer cache, formats/tokenizer_cache.c), rad_container_create (a
** conversion's PATH.partial.XXXXXX, formats/rad_container.c) and
** rad_outfile_open (app/cli.c, the same mkostemp pattern; not linked here,
** tests/e2e/test_output.sh covers its files).
**
** The hook is the link line, as in test_alloc_fail.c: getrandom, openat and
** mkostemp of the code under test land in the __wrap_ functions below
** (Makefile, TESTLIBS of this target), which record each creating open and
** can make getrandom return chosen bytes.  Checked:
**
**   - each temporary is opened O_CREAT | O_EXCL | O_NOFOLLOW (mkostemp is
**     exclusive by definition), its random part 16 hex digits of getrandom
**     (64 bits) or mkostemp's six characters, different every time, with
**     no PID or clock in it: with getrandom made constant, the name is the
**     same every time;
**   - and even a name an attacker did guess (getrandom made constant, a
**     link or a file planted there) is refused, never followed: the link's
**     target and the planted file keep their bytes.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rad_container.h"
#include "tokenizer_cache.h"
#include "../../app/models/safe_fs.h"

/* ------------------------------------------------------------ the hook */

#define MAX_SEEN 512

static char seen[MAX_SEEN][256];   /* names opened with O_CREAT, in order */
static int seen_flags[MAX_SEEN];
static int n_seen;
static int fixed_random;           /* getrandom returns 0x11, 0x22, ... */

ssize_t __real_getrandom(void *buf, size_t n, unsigned flags);
int __real_openat(int dfd, const char *path, int flags, ...);
int __real_mkostemp(char *tmpl, int flags);

ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
    if (!fixed_random) return __real_getrandom(buf, n, flags);
    for (size_t i = 0; i < n; i++) ((unsigned char *)buf)[i] = (unsigned char)(0x11 * (i % 15 + 1));
    return (ssize_t)n;
}

static void note(const char *name, int flags)
{
    if (n_seen >= MAX_SEEN) return;
    snprintf(seen[n_seen], sizeof seen[n_seen], "%s", name);
    seen_flags[n_seen++] = flags;
}

int __wrap_openat(int dfd, const char *path, int flags, ...)
{
    int mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
        note(path, flags);
    }
    return __real_openat(dfd, path, flags, mode);
}

int __wrap_mkostemp(char *tmpl, int flags)
{
    int fd = __real_mkostemp(tmpl, flags);
    note(tmpl, flags | O_CREAT | O_EXCL); /* mkostemp(3): always O_CREAT | O_EXCL */
    return fd;
}

/* ------------------------------------------------------------ fixtures */

static char root[64], outside[128];

static int setup(void **state)
{
    (void)state;
    strcpy(root, "/tmp/rad_test_temp_XXXXXX");
    if (!mkdtemp(root)) return -1;
    snprintf(outside, sizeof outside, "%s.outside", root);
    FILE *f = fopen(outside, "w");
    if (!f) return -1;
    fputs("not yours", f);
    fclose(f);
    n_seen = 0;
    fixed_random = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, outside);
    fixed_random = 0;
    return system(cmd) == 0 ? 0 : -1;
}

static const char *under(const char *name)
{
    static char buf[4][256];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s", root, name);
    return p;
}

/* The last path component. */
static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The random part of a temporary name ".NAME.<16 hex>.tmp"; fails unless
** the name has that shape. */
static void hex_part(const char *name, const char *file, char out[17])
{
    char want[128];
    snprintf(want, sizeof want, ".%s.", file);
    size_t wl = strlen(want), n = strlen(name);
    if (strncmp(name, want, wl) != 0 || n != wl + 16 + 4 || strcmp(name + n - 4, ".tmp") != 0)
        fail_msg("temporary '%s' is not '.%s.<16 hex>.tmp'", name, file);
    memcpy(out, name + wl, 16);
    out[16] = 0;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", out[i])) fail_msg("temporary '%s': '%s' is not hex", name, out);
}

static void expect_exclusive(int i)
{
    int need = O_CREAT | O_EXCL;
    if ((seen_flags[i] & need) != need) fail_msg("'%s' was created without O_EXCL", seen[i]);
}

static void expect_file(const char *path, const char *bytes)
{
    char buf[64] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_string_equal(buf, bytes);
}

/* ------------------------------------------------------------ safe_fs */

/* 100 writes: 100 exclusive temporaries, 100 different random parts. */
static void test_sfs_names_random(void **state)
{
    (void)state;
    char parts[100][17];
    for (int k = 0; k < 100; k++) {
        n_seen = 0;
        assert_int_equal(rad_sfs_write_file(root, under("refs-main"), "abc", 3), 0);
        int t = -1;
        for (int i = 0; i < n_seen; i++)
            if (seen[i][0] == '.') t = i;
        if (t < 0) fail_msg("write %d made no temporary", k);
        expect_exclusive(t);
        if (!(seen_flags[t] & O_NOFOLLOW)) fail_msg("'%s' was created without O_NOFOLLOW", seen[t]);
        hex_part(seen[t], "refs-main", parts[k]);
        for (int j = 0; j < k; j++)
            if (!strcmp(parts[j], parts[k])) fail_msg("writes %d and %d used the same name %s", j, k, parts[k]);
    }
    expect_file(under("refs-main"), "abc");
}

/* The name is getrandom's bytes and nothing else: made constant, getrandom
** gives the same name twice (no PID, counter or clock in it). */
static void test_sfs_name_is_getrandom(void **state)
{
    (void)state;
    fixed_random = 1;
    char a[17], b[17];
    n_seen = 0;
    assert_int_equal(rad_sfs_write_file(root, under("f"), "1", 1), 0);
    hex_part(seen[n_seen - 1], "f", a);
    n_seen = 0;
    assert_int_equal(rad_sfs_write_file(root, under("f"), "2", 1), 0);
    hex_part(seen[n_seen - 1], "f", b);
    assert_string_equal(a, "1122334455667788");
    assert_string_equal(b, a);
}

/* A guessed name with a link planted at it: refused, the link's target
** untouched, the file not written; a plain file planted there: the same. */
static void test_sfs_planted_temp_refused(void **state)
{
    (void)state;
    fixed_random = 1;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", under(".g.1122334455667788.tmp"));
    assert_int_equal(symlink(outside, tmp), 0);
    rad_error_clear();
    int rc = rad_sfs_write_file(root, under("g"), "written", 7);
    assert_true(rc < 0);
    assert_non_null(strstr(rad_error_message(), under("g")));
    expect_file(outside, "not yours");
    struct stat st;
    assert_int_not_equal(lstat(under("g"), &st), 0);
    unlink(tmp);

    FILE *f = fopen(tmp, "w");
    fputs("planted", f);
    fclose(f);
    assert_true(rad_sfs_write_file(root, under("g"), "written", 7) < 0);
    expect_file(tmp, "planted");
    assert_int_not_equal(lstat(under("g"), &st), 0);
}

/* ------------------------------------------------------------ tokenizer cache */

static void test_tokcache_temp(void **state)
{
    (void)state;
    unsigned char key[32];
    for (int i = 0; i < 32; i++) key[i] = (unsigned char)i;
    char parts[20][17];
    const char *dir = under("tokenizers");
    for (int k = 0; k < 20; k++) {
        n_seen = 0;
        rad_tokcache_put(dir, key, "blob", 4);
        if (n_seen != 1) fail_msg("put %d: %d files created", k, n_seen);
        expect_exclusive(0);
        if (!(seen_flags[0] & O_NOFOLLOW)) fail_msg("'%s' was created without O_NOFOLLOW", seen[0]);
        char file[20];
        memcpy(file, seen[0] + 1, 16); /* ".<16 of the entry name>.<hex>.tmp" */
        file[16] = 0;
        hex_part(seen[0], file, parts[k]);
        for (int j = 0; j < k; j++)
            if (!strcmp(parts[j], parts[k])) fail_msg("puts %d and %d used the same name", j, k);
    }
    /* a guessed name: getrandom made constant, a link planted where the
    ** next temporary goes; the put writes nothing through it */
    fixed_random = 1;
    n_seen = 0;
    rad_tokcache_put(dir, key, "blob", 4);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/%s", dir, seen[0]);
    assert_int_equal(symlink(outside, tmp), 0);
    n_seen = 0;
    rad_tokcache_put(dir, key, "other", 5);
    assert_int_equal(n_seen, 1);
    assert_string_equal(base_of(seen[0]), base_of(tmp)); /* the same guessed name, refused by O_EXCL */
    expect_file(outside, "not yours");
    unlink(tmp);
}

/* ------------------------------------------------------------ conversions */

/* A conversion's partial: PATH.partial. and six mkostemp characters, a new
** name each time, created exclusively. */
static void test_container_partial(void **state)
{
    (void)state;
    char names[10][256];
    for (int k = 0; k < 10; k++) {
        n_seen = 0;
        RadContainerWriter *w = NULL;
        assert_int_equal(rad_container_create(under("m.rad"), &w), 0);
        assert_true(n_seen >= 1);
        expect_exclusive(0);
        const char *b = base_of(seen[0]);
        if (strncmp(b, "m.rad.partial.", 14) != 0 || strlen(b) != 20 || strstr(b, "XXXXXX"))
            fail_msg("partial '%s' is not m.rad.partial.<6 random>", b);
        snprintf(names[k], sizeof names[k], "%s", b);
        for (int j = 0; j < k; j++)
            if (!strcmp(names[j], names[k])) fail_msg("two conversions used the partial name %s", b);
        rad_container_abort(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sfs_names_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sfs_name_is_getrandom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sfs_planted_temp_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tokcache_temp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_container_partial, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
