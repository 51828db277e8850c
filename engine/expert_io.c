/*
** expert_io.c: the reads that bring routed experts into their slots
** (experts.c decides which and when; this file only moves the bytes).
**
** A read is started with a tag and reported done, or failed, through the
** callback given at open, once all of its bytes have landed.  With io_uring
** (liburing) up to `depth` reads are in flight at once, each expert's run
** one request straight into its slot; the slots are registered with the
** ring once, so the kernel pins them once rather than on every read
** (IORING_OP_READ_FIXED).  A drive serves many requests in flight far
** faster than one after another, and a read in flight costs no thread: the
** engine computes while the drive works, which is how experts.c overlaps
** the next layer's reads with this layer's products.  Where io_uring cannot
** be had (an old kernel, a sandbox that forbids it) or depth 0 is asked, a
** read is one pread() done at once, inside start.
**
** Either way a read that comes back short is continued where it stopped,
** and one that reaches the end of the file, or fails, is reported failed
** with a message naming the file, the offset and the cause: never a token
** computed from bytes that did not arrive.
*/
#include "engine_internal.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../formats/file_access.h"

typedef struct InFlight {
    RadExpertRead read;
    uint64_t tag;
    size_t done;                /* bytes landed so far */
    int used;
} InFlight;

struct RadExpertIo {
    int fd, depth, registered;  /* depth 0: pread; registered: the slots are the ring's fixed buffers */
    const char *path;
    struct io_uring ring;
    InFlight *flight;           /* [depth] */
    int in_flight;
    RadExpertIoDone done;
    void *arg;
    char kind[96];
};

void rad_expert_io_free(RadExpertIo *io)
{
    if (!io) return;
    if (io->depth > 0) {
        while (io->in_flight > 0 && rad_expert_io_wait(io) == RAD_OK) {}   /* nothing lands after the slots go */
        io_uring_queue_exit(&io->ring);
    }
    free(io->flight);
    free(io);
}

int rad_expert_io_open(int fd, const char *path, int depth, unsigned char *const *buffers, int n_buffers,
                       size_t buffer_bytes, RadExpertIoDone done, void *arg, RadExpertIo **out)
{
    *out = NULL;
    RadExpertIo *io = calloc(1, sizeof *io);
    if (!io) return RAD_E_NOMEM;
    io->fd = fd;
    io->path = path;
    io->done = done;
    io->arg = arg;
    snprintf(io->kind, sizeof io->kind, "one pread at a time");
    if (depth > 0 && (io->flight = calloc((size_t)depth, sizeof *io->flight)) &&
        io_uring_queue_init((unsigned)depth, &io->ring, 0) == 0) {
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
int rad_expert_io_busy(const RadExpertIo *io) { return io->in_flight; }

/* Queue what is left of flight i. */
static void queue(RadExpertIo *io, int i)
{
    const InFlight *f = &io->flight[i];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);     /* never NULL: at most depth in flight */
    unsigned char *dst = f->read.dst + f->done;
    const size_t n = f->read.bytes - f->done;
    if (io->registered && f->read.buffer >= 0)
        io_uring_prep_read_fixed(sqe, io->fd, dst, (unsigned)n, f->read.offset + f->done, f->read.buffer);
    else
        io_uring_prep_read(sqe, io->fd, dst, (unsigned)n, f->read.offset + f->done);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
}

int rad_expert_io_wait(RadExpertIo *io)
{
    if (io->in_flight == 0) return RAD_OK;
    for (;;) {
        struct io_uring_cqe *cqe;
        int w = io_uring_wait_cqe(&io->ring, &cqe);
        if (w == -EINTR) continue;
        if (w < 0) return rad_error_set(RAD_E_IO, "%s: waiting for expert reads: %s", io->path, strerror(-w));
        const int i = (int)io_uring_cqe_get_data64(cqe), res = cqe->res;
        io_uring_cqe_seen(&io->ring, cqe);
        InFlight *f = &io->flight[i];
        int rc = RAD_OK;
        if (res == -EINTR || res == -EAGAIN || (res > 0 && (f->done += (size_t)res) < f->read.bytes)) {
            queue(io, i);           /* interrupted, or short: the rest of it */
            if (io_uring_submit(&io->ring) >= 0) continue;
            rc = rad_error_set(RAD_E_IO, "%s: cannot submit expert reads to io_uring", io->path);
        } else if (res <= 0)
            rc = rad_error_set(RAD_E_IO, "%s: reading an expert's %zu bytes at offset %llu: %s", io->path,
                               f->read.bytes, (unsigned long long)(f->read.offset + f->done),
                               res < 0 ? strerror(-res) : "the file ends there (shortened or replaced while open?)");
        f->used = 0;
        io->in_flight--;
        io->done(io->arg, f->tag, rc);
        return RAD_OK;
    }
}

int rad_expert_io_start(RadExpertIo *io, const RadExpertRead *read, uint64_t tag)
{
    if (io->depth == 0) {
        io->done(io->arg, tag, rad_file_pread(io->fd, read->dst, read->offset, read->bytes, io->path));
        return RAD_OK;
    }
    while (io->in_flight == io->depth) {
        int rc = rad_expert_io_wait(io);
        if (rc) return rc;
    }
    int i = 0;
    while (io->flight[i].used) i++;
    io->flight[i] = (InFlight){.read = *read, .tag = tag, .used = 1};
    io->in_flight++;
    queue(io, i);
    if (io_uring_submit(&io->ring) < 0) {
        io->flight[i].used = 0;
        io->in_flight--;
        return rad_error_set(RAD_E_IO, "%s: cannot submit expert reads to io_uring", io->path);
    }
    return RAD_OK;
}
