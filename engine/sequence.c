/*
** sequence.c: sequences and their KV snapshots.
**
** A sequence is a row of the KV pool: it is opened empty, grows as tokens
** are evaluated into it, may be cut back to a shared prefix (a conversation's
** next turn) and saved to bytes or restored from them (a session resumed
** without re-running its prompt).
*/
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

int rad_engine_seq_new(RadEngine *e, int *seq) { return rad_kv_seq_new(&e->kv, seq); }

static int seq_open(const RadEngine *e, int seq)
{
    return seq >= 0 && seq < e->kv.max_seqs && e->kv.seqs[seq].used;
}

int rad_engine_seq_truncate(RadEngine *e, int seq, int n)
{
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    if (n < 0 || n > e->kv.seqs[seq].len)
        return rad_error_set(RAD_E_ARG, "cannot truncate a sequence of %d positions to %d", e->kv.seqs[seq].len, n);
    int rc = rad_kv_truncate(&e->kv, seq, n);
    if (rc == RAD_E_RANGE && rad_kv_has_state(&e->kv))
        return rad_error_set(rc, "the model's recurrent state cannot be rewound to position %d (it holds %d, "
                             "checkpoint at %d): run the sequence again", n, e->kv.seqs[seq].len,
                             e->kv.seqs[seq].checkpoint_len);
    if (rc == RAD_E_RANGE)
        return rad_error_set(rc, "the sliding window has already dropped positions needed to resume at %d", n);
    return rc;
}

int rad_engine_seq_checkpoint(RadEngine *e, int seq)
{
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    return rad_kv_checkpoint(&e->kv, seq);
}

/* A snapshot is "RADSNAP2", the 64-character model id, then kv.c's bytes.
** Format 1 ("RADSNAP1", before the KV state kinds) held attention rows only
** and is refused by name. */
#define SNAP_MAGIC "RADSNAP2"
#define SNAP_HEAD 72

int rad_engine_seq_snapshot(const RadEngine *e, int seq, void **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    int64_t body = rad_kv_snapshot_bytes(&e->kv, seq);
    uint8_t *buf = malloc((size_t)(SNAP_HEAD + body));
    if (!buf) return rad_error_set(RAD_E_NOMEM, "out of memory for a %lld-byte KV snapshot", (long long)body);
    memcpy(buf, SNAP_MAGIC, 8);
    memcpy(buf + 8, e->model_id, 64);
    int rc = rad_kv_snapshot(&e->kv, seq, buf + SNAP_HEAD, body);
    if (rc) { free(buf); return rc; }
    *out = buf;
    *size = (size_t)(SNAP_HEAD + body);
    return RAD_OK;
}

int rad_engine_seq_restore(RadEngine *e, int seq, const void *data, size_t size)
{
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    const uint8_t *d = data;
    if (size >= 8 && memcmp(d, "RADSNAP", 7) == 0 && d[7] != SNAP_MAGIC[7] && d[7] >= '0' && d[7] <= '9')
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: format %c, written by an older radiance; this one reads "
                             "format %c", d[7], SNAP_MAGIC[7]);
    if (size < SNAP_HEAD || memcmp(d, SNAP_MAGIC, 8) != 0)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: not a radiance snapshot");
    if (memcmp(d + 8, e->model_id, 64) != 0)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: made by another model or another build of it");
    return rad_kv_restore(&e->kv, seq, d + SNAP_HEAD, (int64_t)(size - SNAP_HEAD));
}
void rad_engine_seq_free(RadEngine *e, int seq) { rad_kv_seq_free(&e->kv, seq); }

int rad_engine_seq_len(const RadEngine *e, int seq)
{
    if (seq < 0 || seq >= e->kv.max_seqs || !e->kv.seqs[seq].used) return -1;
    return e->kv.seqs[seq].len;
}
