/*
** plan.c: one activation arena for the whole step, sized once at load.
**
** Every transient buffer is live from the first op that touches it to the
** last (in declaration order, which is also issue order: the runtime refuses
** an op issued out of order).  Two buffers whose lifetimes do not overlap may
** share bytes.  Placing them is interval colouring with sizes; we use the
** usual greedy: largest first, each at the lowest offset that collides with
** no already-placed buffer alive at the same time.  It is not optimal, but it
** is deterministic, simple to check, and close on transformer graphs, where a
** few wide buffers (the MLP's intermediate, the logits) dominate.
*/
#include "engine_internal.h"

#include <stdlib.h>

static int lifetimes_overlap(const RadPlanItem *a, const RadPlanItem *b)
{
    if (a->persist || b->persist || a->first < 0 || b->first < 0) return 1;
    return a->first <= b->last && b->first <= a->last;
}

static int64_t round_up(int64_t v, int64_t align) { return (v + align - 1) / align * align; }

int64_t rad_plan_arena(RadPlanItem *items, int n, int64_t align)
{
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order) return -1;
    for (int i = 0; i < n; i++) order[i] = i;
    /* Largest first; ties keep declaration order so the plan is stable. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            const RadPlanItem *a = &items[order[j - 1]], *b = &items[order[j]];
            if (a->bytes >= b->bytes) break;
            int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }

    int64_t arena = 0;
    for (int k = 0; k < n; k++) {
        RadPlanItem *it = &items[order[k]];
        int64_t size = round_up(it->bytes, align);
        int64_t offset = 0;
        /* Move past every placed, overlapping neighbour until a gap fits.  Each
        ** pass either finds no collision or moves offset forward, so it ends. */
        for (int moved = 1; moved;) {
            moved = 0;
            for (int p = 0; p < k; p++) {
                const RadPlanItem *other = &items[order[p]];
                if (!lifetimes_overlap(it, other)) continue;
                int64_t other_end = other->offset + round_up(other->bytes, align);
                if (offset < other_end && other->offset < offset + size) {
                    offset = other_end;
                    moved = 1;
                }
            }
        }
        it->offset = offset;
        if (offset + size > arena) arena = offset + size;
    }
    free(order);
    return arena;
}
