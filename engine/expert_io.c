/*
** expert_io.c: the reads that bring routed experts into their slots
** (experts.c decides which; this file only moves the bytes).
**
** One call reads a batch: every expert an op needs that is not resident.
** With io_uring (liburing) the whole batch is in flight at once, up to the
** queue depth, each expert's run one request straight into its slot; the
** slots are registered with the ring once, so the kernel pins them once
** rather than on every read (IORING_OP_READ_FIXED).  A drive serves many
** requests in flight far faster than one after another: that is the point.
** Where io_uring cannot be had (an old kernel, a sandbox that forbids it)
** or depth 0 is asked, the batch is read one pread() at a time.
**
** Either way a read that comes back short is continued where it stopped,
** and one that reaches the end of the file, or fails, is an error naming
** the file, the offset and the cause: never a token computed from bytes
** that did not arrive.
*/
#include "engine_internal.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../formats/file_access.h"

struct RadExpertIo {
    int fd, depth, registered;  /* depth 0: pread; registered: the slots are the ring's fixed buffers */
    const char *path;
    struct io_uring ring;
    unsigned char *const *buffers; /* the slots, in registration order */
    size_t buffer_bytes;
    int n_buffers;
    char kind[96];
};

void rad_expert_io_free(RadExpertIo *io)
{
    if (!io) return;
    if (io->depth > 0) io_uring_queue_exit(&io->ring);
    free(io);
}

int rad_expert_io_open(int fd, const char *path, int depth, unsigned char *const *buffers, int n_buffers,
                       size_t buffer_bytes, RadExpertIo **out)
{
    *out = NULL;
    RadExpertIo *io = calloc(1, sizeof *io);
    if (!io) return RAD_E_NOMEM;
    io->fd = fd;
    io->path = path;
    io->buffers = buffers;
    io->n_buffers = n_buffers;
    io->buffer_bytes = buffer_bytes;
    snprintf(io->kind, sizeof io->kind, "one pread at a time");
    if (depth > 0 && io_uring_queue_init((unsigned)depth, &io->ring, 0) == 0) {
        io->depth = depth;
        /* Registering is an optimisation: a kernel that refuses it (a
        ** locked-memory limit, too many buffers) still reads plainly. */
        struct iovec *v = n_buffers > 0 ? calloc((size_t)n_buffers, sizeof *v) : NULL;
        if (v) {
            for (int i = 0; i < n_buffers; i++) v[i] = (struct iovec){.iov_base = buffers[i], .iov_len = buffer_bytes};
            io->registered = io_uring_register_buffers(&io->ring, v, (unsigned)n_buffers) == 0;
            free(v);
        }
        snprintf(io->kind, sizeof io->kind, "io_uring, %d in flight%s", depth,
                 io->registered ? ", slots registered" : "");
    }
    *out = io;
    return RAD_OK;
}

const char *rad_expert_io_kind(const RadExpertIo *io) { return io->kind; }
int rad_expert_io_depth(const RadExpertIo *io) { return io->depth; }

static int short_read(const RadExpertIo *io, const RadExpertRead *r, size_t done, int err)
{
    return rad_error_set(RAD_E_IO, "%s: reading an expert's %zu bytes at offset %llu: %s", io->path, r->bytes,
                         (unsigned long long)(r->offset + done),
                         err ? strerror(err) : "the file ends there (shortened or replaced while open?)");
}

/* Queue what is left of read i (its first done[i] bytes have arrived). */
static void queue(RadExpertIo *io, const RadExpertRead *r, size_t done, int i)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);     /* never NULL: at most depth in flight */
    unsigned char *dst = r->dst + done;
    const size_t n = r->bytes - done;
    if (io->registered && r->buffer >= 0)
        io_uring_prep_read_fixed(sqe, io->fd, dst, (unsigned)n, r->offset + done, r->buffer);
    else
        io_uring_prep_read(sqe, io->fd, dst, (unsigned)n, r->offset + done);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
}

int rad_expert_io_read(RadExpertIo *io, const RadExpertRead *reads, int n)
{
    if (n <= 0) return RAD_OK;
    if (io->depth == 0) {
        for (int i = 0; i < n; i++) {
            int rc = rad_file_pread(io->fd, reads[i].dst, reads[i].offset, reads[i].bytes, io->path);
            if (rc) return rc;
        }
        return RAD_OK;
    }
    size_t *done = calloc((size_t)n, sizeof *done);
    if (!done) return RAD_E_NOMEM;
    int next = 0, in_flight = 0, rc = RAD_OK;
    while (next < n || in_flight > 0) {
        while (rc == RAD_OK && next < n && in_flight < io->depth) queue(io, &reads[next], 0, next), next++, in_flight++;
        if (io_uring_submit(&io->ring) < 0 && rc == RAD_OK)
            rc = rad_error_set(RAD_E_IO, "%s: cannot submit expert reads to io_uring", io->path);
        if (in_flight == 0) break;
        struct io_uring_cqe *cqe;
        int w = io_uring_wait_cqe(&io->ring, &cqe);
        if (w == -EINTR) continue;
        if (w < 0) {        /* the ring itself failed: nothing more will complete */
            rc = rc ? rc : rad_error_set(RAD_E_IO, "%s: waiting for expert reads: %s", io->path, strerror(-w));
            break;
        }
        const int i = (int)io_uring_cqe_get_data64(cqe);
        const int res = cqe->res;
        io_uring_cqe_seen(&io->ring, cqe);
        in_flight--;
        if (rc) continue;   /* an earlier read failed: drain the rest, then report it */
        if (res == -EINTR || res == -EAGAIN) {
            queue(io, &reads[i], done[i], i);
            in_flight++;
        } else if (res <= 0) {
            rc = short_read(io, &reads[i], done[i], res < 0 ? -res : 0);
        } else if ((done[i] += (size_t)res) < reads[i].bytes) {
            queue(io, &reads[i], done[i], i);   /* short: the rest of it */
            in_flight++;
        }
    }
    free(done);
    return rc;
}
