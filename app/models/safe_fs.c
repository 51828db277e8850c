/*
** safe_fs.c: file operations that never follow a link below a trusted
** root (safe_fs.h says why).
**
** Each call opens the root, then the folders below it one by one with
** openat(O_NOFOLLOW | O_DIRECTORY), and acts on the last component with an
** *at() call on that folder: between the check and the act there is no
** path left for anyone to swap.
*/
#include "safe_fs.h"

#include "../../base/rad_types.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

int rad_sfs_refuse_link(const char *path, const char *what)
{
    return rad_error_set(RAD_E_IO,
                         "%s: a symbolic link where %s was expected; refusing to go through it (another "
                         "program or user put it there): remove it and run the command again",
                         path, what);
}

/* mkdir -p for the root (trusted: it may be or pass through a link). */
static int make_root(const char *root)
{
    char buf[PATH_MAX];
    size_t n = strlen(root);
    if (n == 0 || n >= sizeof buf) return rad_error_set(RAD_E_IO, "%s: path too long", root);
    memcpy(buf, root, n + 1);
    for (char *p = buf + 1;; p++)
        if (*p == '/' || !*p) {
            char saved = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return rad_error_set(RAD_E_IO, "%s: cannot create the folder: %s", buf, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    return RAD_OK;
}

/* The part of `path` below `root` ("" for the root itself), or NULL. */
static const char *below(const char *root, const char *path)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != 0)) return NULL;
    path += n;
    while (*path == '/') path++;
    return path;
}

/* Open the folder made of the first `len` bytes of `rel` below root. */
static int open_rel(const char *root, const char *rel, size_t len, int create, const char *shown)
{
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        int rc = make_root(root);
        if (rc) return rc;
        fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0)
        return errno == ENOENT ? RAD_E_NOTFOUND : rad_error_set(RAD_E_IO, "%s: %s", root, strerror(errno));
    size_t at = 0;
    while (at < len) {
        size_t end = at;
        while (end < len && rel[end] != '/') end++;
        char part[NAME_MAX + 1];
        if (end - at > NAME_MAX) {
            close(fd);
            return rad_error_set(RAD_E_IO, "%s: a name is too long", shown);
        }
        memcpy(part, rel + at, end - at);
        part[end - at] = 0;
        if (part[0] && strcmp(part, ".") != 0) {
            if (!strcmp(part, "..")) {
                close(fd);
                return rad_error_set(RAD_E_IO, "%s: '..' climbs out of %s", shown, root);
            }
            int sub = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0 && errno == ENOENT && create) {
                if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
                    int e = errno;
                    close(fd);
                    return rad_error_set(RAD_E_IO, "%s/%.*s: cannot create the folder: %s", root, (int)end, rel,
                                         strerror(e));
                }
                sub = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            }
            if (sub < 0) {
                int e = errno;
                struct stat st;
                int is_link = fstatat(fd, part, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
                close(fd);
                char where[PATH_MAX];
                snprintf(where, sizeof where, "%s/%.*s", root, (int)end, rel);
                if (is_link) return rad_sfs_refuse_link(where, "a folder");
                if (e == ENOENT) return RAD_E_NOTFOUND;
                return rad_error_set(RAD_E_IO, "%s: %s", where,
                                     e == ENOTDIR ? "not a folder, where one was expected: remove it" : strerror(e));
            }
            close(fd);
            fd = sub;
        }
        at = end + 1;
    }
    return fd;
}

int rad_sfs_open_dir(const char *root, const char *path, int create)
{
    const char *rel = below(root, path);
    if (!rel) return rad_error_set(RAD_E_IO, "%s: not inside %s", path, root);
    return open_rel(root, rel, strlen(rel), create, path);
}

/* The folder holding `path`'s last component, and that component. */
static int open_parent(const char *root, const char *path, int create, const char **name)
{
    const char *rel = below(root, path);
    if (!rel || !*rel) return rad_error_set(RAD_E_IO, "%s: not a file inside %s", path, root);
    const char *slash = strrchr(rel, '/');
    *name = slash ? slash + 1 : rel;
    if (!**name || !strcmp(*name, ".") || !strcmp(*name, ".."))
        return rad_error_set(RAD_E_IO, "%s: not a file name", path);
    return open_rel(root, rel, slash ? (size_t)(slash - rel) : 0, create, path);
}

int rad_sfs_lstat(const char *root, const char *path, struct stat *st)
{
    const char *name;
    int dfd = open_parent(root, path, 0, &name);
    if (dfd < 0) return dfd;
    int rc = fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 ? RAD_OK : RAD_E_NOTFOUND;
    close(dfd);
    return rc;
}

/* A file we may read or write: regular, one link. */
static int check_st(const struct stat *st, const char *path)
{
    if (!S_ISREG(st->st_mode)) return rad_error_set(RAD_E_IO, "%s: not a regular file: remove it", path);
    if (st->st_nlink > 1)
        return rad_error_set(RAD_E_IO,
                             "%s: has %lu hard links; refusing a file shared with another name (it may be "
                             "someone else's): remove it and run the command again",
                             path, (unsigned long)st->st_nlink);
    return RAD_OK;
}

int rad_sfs_check_db(const char *path)
{
    static const char *const sidecar[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sidecar / sizeof *sidecar; i++) {
        char *p = NULL;
        if (asprintf(&p, "%s%s", path, sidecar[i]) < 0) return rad_error_set(RAD_E_NOMEM, "out of memory");
        struct stat st;
        int rc = RAD_OK;
        if (lstat(p, &st) == 0)
            rc = S_ISLNK(st.st_mode) ? rad_sfs_refuse_link(p, i ? "the database's own file" : "the database")
                                     : check_st(&st, p);
        else if (errno != ENOENT)
            rc = rad_error_set(RAD_E_IO, "%s: %s", p, strerror(errno));
        free(p);
        if (rc) return rc;
    }
    return RAD_OK;
}

static int check_file(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
    return check_st(&st, path);
}

int rad_sfs_open_file(const char *root, const char *path, int flags, int mode)
{
    const char *name;
    int dfd = open_parent(root, path, (flags & O_CREAT) != 0, &name);
    if (dfd < 0) return dfd;
    int fd = openat(dfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
    int e = errno;
    struct stat st;
    int is_link = fd < 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    close(dfd);
    if (fd < 0) {
        if (is_link) return rad_sfs_refuse_link(path, "a file");
        if (e == ENOENT) return RAD_E_NOTFOUND;
        return rad_error_set(RAD_E_IO, "%s: %s", path, strerror(e));
    }
    int rc = check_file(fd, path);
    if (rc) {
        close(fd);
        return rc;
    }
    /* back to blocking reads and writes (O_NONBLOCK was for the open) */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* ".NAME.<16 hex>.tmp": nobody can guess it before we make it. */
static int temp_name(const char *name, char *out, size_t cap)
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return rad_error_set(RAD_E_IO, "getrandom: %s", strerror(errno));
    int n = snprintf(out, cap, ".%.160s.%02x%02x%02x%02x%02x%02x%02x%02x.tmp", name, r[0], r[1], r[2], r[3], r[4], r[5],
                     r[6], r[7]);
    return n > 0 && (size_t)n < cap ? RAD_OK : rad_error_set(RAD_E_IO, "%s: name too long", name);
}

/* What stands at `name` may be replaced by a file (absent, or a regular file). */
static int replaceable(int dfd, const char *name, const char *path, int links_ok)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return RAD_OK;
    if (S_ISLNK(st.st_mode)) return links_ok ? RAD_OK : rad_sfs_refuse_link(path, "a file");
    if (S_ISDIR(st.st_mode)) return rad_error_set(RAD_E_IO, "%s: a folder, where a file was expected: remove it", path);
    return RAD_OK;
}

int rad_sfs_write_file(const char *root, const char *path, const void *data, size_t len)
{
    const char *name;
    int dfd = open_parent(root, path, 1, &name);
    if (dfd < 0) return dfd;
    char tmp[256];
    int rc = replaceable(dfd, name, path, 0);
    if (!rc) rc = temp_name(name, tmp, sizeof tmp);
    int fd = rc ? -1 : openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (!rc && fd < 0) rc = rad_error_set(RAD_E_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
    const unsigned char *p = data;
    size_t left = len;
    while (!rc && left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) rc = rad_error_set(RAD_E_IO, "%s: cannot write: %s", path, w < 0 ? strerror(errno) : "disk full");
        else p += w, left -= (size_t)w;
    }
    if (fd >= 0 && close(fd) != 0 && !rc) rc = rad_error_set(RAD_E_IO, "%s: cannot write: %s", path, strerror(errno));
    if (!rc && renameat(dfd, tmp, dfd, name) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: cannot move into place: %s", path, strerror(errno));
    if (rc && fd >= 0) unlinkat(dfd, tmp, 0);
    close(dfd);
    return rc;
}

int rad_sfs_symlink(const char *root, const char *path, const char *target)
{
    const char *name;
    int dfd = open_parent(root, path, 1, &name);
    if (dfd < 0) return dfd;
    char tmp[256];
    int rc = replaceable(dfd, name, path, 1);
    if (!rc) rc = temp_name(name, tmp, sizeof tmp);
    if (!rc && symlinkat(target, dfd, tmp) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: cannot link to %s: %s", path, target, strerror(errno));
    else if (!rc && renameat(dfd, tmp, dfd, name) != 0) {
        rc = rad_error_set(RAD_E_IO, "%s: cannot link to %s: %s", path, target, strerror(errno));
        unlinkat(dfd, tmp, 0);
    }
    close(dfd);
    return rc;
}

int rad_sfs_readlink(const char *root, const char *path, char *buf, size_t cap)
{
    const char *name;
    int dfd = open_parent(root, path, 0, &name);
    if (dfd < 0) return dfd;
    ssize_t n = readlinkat(dfd, name, buf, cap - 1);
    close(dfd);
    if (n < 0 || (size_t)n >= cap - 1) return RAD_E_NOTFOUND;
    buf[n] = 0;
    return (int)n;
}

int rad_sfs_rename(const char *root, const char *from, const char *to)
{
    const char *name_from, *name_to;
    int dfd = open_parent(root, from, 0, &name_from);
    if (dfd < 0) return dfd;
    const char *slash_from = strrchr(from, '/'), *slash_to = strrchr(to, '/');
    int rc = RAD_OK;
    name_to = slash_to ? slash_to + 1 : to;
    if (slash_from - from != slash_to - to || strncmp(from, to, (size_t)(slash_from - from)) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: cannot be renamed into another folder (%s)", from, to);
    else if (renameat(dfd, name_from, dfd, name_to) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: cannot move into place: %s", to, strerror(errno));
    close(dfd);
    return rc;
}

int rad_sfs_unlink(const char *root, const char *path)
{
    const char *name;
    int dfd = open_parent(root, path, 0, &name);
    if (dfd == RAD_E_NOTFOUND) return RAD_OK;
    if (dfd < 0) return dfd;
    int rc = unlinkat(dfd, name, 0) == 0 || errno == ENOENT
                 ? RAD_OK
                 : rad_error_set(RAD_E_IO, "%s: cannot remove: %s", path, strerror(errno));
    close(dfd);
    return rc;
}
