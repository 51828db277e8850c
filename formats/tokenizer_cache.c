/*
** tokenizer_cache.c: the on-disk cache of prepared tokenizers
** (tokenizer_cache.h says what and why).
*/
#include "tokenizer_cache.h"

#include "rad_types.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRY_MAGIC "RADTOKC1"
#define ENTRY_HEADER (8 + 32 + 8)
#define MAX_BLOB (1ull << 31) /* far above any real tokenizer (Gemma 3's is 12 MB) */
#define MAX_KEYED (1ull << 30) /* the most header bytes hashed for a key */

/* ------------------------------------------------------------ the key */

/* The build id note of the running program: another build of the code
** that imports tokenizers must never meet this build's entries. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    EVP_MD_CTX *md = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            size_t name = (n->n_namesz + 3) & ~3u, desc = (n->n_descsz + 3) & ~3u;
            const unsigned char *body = p + sizeof *n;
            if (body + name + desc > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(body, "GNU", 4) == 0) {
                EVP_DigestUpdate(md, body + name, n->n_descsz);
                return 1;
            }
            p = body + name + desc;
        }
    }
    return 1; /* only the first object, the program itself */
}

int rad_tokcache_key(const char *path, uint64_t data_start, unsigned char key[32])
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return RAD_E_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return RAD_E_IO;
    }
    uint64_t n = data_start && data_start <= (uint64_t)st.st_size ? data_start : (uint64_t)st.st_size;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 20);
    int rc = md && buf && n <= MAX_KEYED ? RAD_OK : RAD_E_NOMEM;
    if (!rc) {
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        EVP_DigestUpdate(md, "radiance tokenizer cache 1", 26);
        dl_iterate_phdr(find_build_id, md);
        if (!EVP_DigestUpdate(md, &n, sizeof n)) rc = RAD_E_IO;
    }
    for (uint64_t at = 0; !rc && at < n;) {
        size_t want = n - at < (1u << 20) ? (size_t)(n - at) : (1u << 20);
        ssize_t got = pread(fd, buf, want, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            rc = RAD_E_IO;
            break;
        }
        EVP_DigestUpdate(md, buf, (size_t)got);
        at += (uint64_t)got;
    }
    unsigned int len = 0;
    if (!rc) EVP_DigestFinal_ex(md, key, &len);
    EVP_MD_CTX_free(md);
    free(buf);
    close(fd);
    return rc;
}

/* ---------------------------------------------------------- entries */

static void entry_name(const unsigned char key[32], char name[70])
{
    for (int i = 0; i < 32; i++) snprintf(name + 2 * i, 3, "%02x", key[i]);
    memcpy(name + 64, ".tok", 5);
}

int rad_tokcache_map(const char *dir, const unsigned char key[32], const void **blob, size_t *len, void **map,
                     size_t *map_len)
{
    *blob = NULL;
    *len = 0;
    *map = NULL;
    *map_len = 0;
    char name[70], *path = NULL;
    entry_name(key, name);
    if (!dir || asprintf(&path, "%s/%s", dir, name) < 0) return RAD_E_NOTFOUND;
    /* never through a link; never a FIFO or a device */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    free(path);
    if (fd < 0) return RAD_E_NOTFOUND;
    struct stat st;
    uint64_t n = 0;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > ENTRY_HEADER &&
        (uint64_t)st.st_size <= MAX_BLOB + ENTRY_HEADER)
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    const unsigned char *head = m != MAP_FAILED ? m : NULL;
    if (head) memcpy(&n, head + 40, 8);
    int ok = head && memcmp(head, ENTRY_MAGIC, 8) == 0 && memcmp(head + 8, key, 32) == 0 &&
             (uint64_t)st.st_size == ENTRY_HEADER + n;
    if (ok) futimens(fd, NULL); /* most recently used; fails harmlessly when read-only */
    close(fd);
    if (!ok) {
        if (head) munmap(m, (size_t)st.st_size);
        return RAD_E_NOTFOUND;
    }
    *blob = head + ENTRY_HEADER;
    *len = (size_t)n;
    *map = m;
    *map_len = (size_t)st.st_size;
    return RAD_OK;
}

/* Keep the newest RAD_TOKCACHE_MAX_ENTRIES entries (by last use). */
static void prune(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    int dfd = dirfd(d);
    struct { char name[70]; time_t t; } old[RAD_TOKCACHE_MAX_ENTRIES + 1];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len != 68 || strcmp(e->d_name + 64, ".tok") != 0) continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        /* keep the RAD_TOKCACHE_MAX_ENTRIES newest in old[], sorted newest first */
        int at = n;
        while (at > 0 && old[at - 1].t < st.st_mtime) at--;
        if (at >= RAD_TOKCACHE_MAX_ENTRIES) {
            unlinkat(dfd, e->d_name, 0);
            continue;
        }
        if (n == RAD_TOKCACHE_MAX_ENTRIES) unlinkat(dfd, old[--n].name, 0);
        memmove(&old[at + 1], &old[at], (size_t)(n - at) * sizeof *old);
        memcpy(old[at].name, e->d_name, 69);
        old[at].t = st.st_mtime;
        n++;
    }
    closedir(d);
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

void rad_tokcache_put(const char *dir, const unsigned char key[32], const void *blob, size_t len)
{
    if (!dir || !blob || !len || len > MAX_BLOB) return;
    /* the folder (its parent is the application's to have made) */
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return;
    char name[70], tmp[96];
    entry_name(key, name);
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
        close(dfd); /* something else stands there: leave it, write nothing */
        return;
    }
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        close(dfd);
        return;
    }
    snprintf(tmp, sizeof tmp, ".%.16s.%02x%02x%02x%02x%02x%02x%02x%02x.tmp", name, rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        close(dfd);
        return;
    }
    unsigned char head[ENTRY_HEADER];
    uint64_t n = len;
    memcpy(head, ENTRY_MAGIC, 8);
    memcpy(head + 8, key, 32);
    memcpy(head + 40, &n, 8);
    int ok = write_all(fd, head, sizeof head) == 0 && write_all(fd, blob, len) == 0;
    if (close(fd) != 0) ok = 0;
    if (!ok || renameat(dfd, tmp, dfd, name) != 0) unlinkat(dfd, tmp, 0);
    close(dfd);
    if (ok) prune(dir);
}
