/*
** residency.c: where every byte of a model lives, under one memory budget.
**
** The budget is --mem-budget when given; else the smaller of the memory the
** system can still give (MemAvailable) and this process's cgroup limit,
** less a floor left to everything else.  Against it the planner places what
** a model needs (docs/RESIDENCY.md says why each rule is what it is):
**
**   fixed      the KV pool, the activation arena and the kernel scratch
**   weights    every tensor a step reads stays mapped from the file; the
**              page cache holds it, and the budget counts it (so does a
**              cgroup)
**   copies     a kernel's own layout of a weight (relayout.c): made while
**              the plan still fits, weight by weight in declaration order;
**              once a weight's copies exist and no op reads it as stored,
**              its mapped pages are given back, so a copy replaces its
**              source instead of doubling it
**   experts    routed experts (access CONDITIONAL) are counted apart, with
**              their movement units (a stacked weight's slices, one per
**              expert): the streaming planner (issue 15) decides which
**              stay resident
**
** When even the weights and the fixed part exceed the budget, nothing is
** copied and the weights are read from the file as the system can page them
** (the plan says so, with the numbers): the model runs, at the drive's speed.
*/
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../formats/file_access.h"

/* What the budget leaves to the rest of the machine: 5% of the memory
** measured, at least 256 MiB. */
static int64_t floor_for(int64_t memory)
{
    int64_t f = memory / 20;
    return f > (INT64_C(256) << 20) ? f : INT64_C(256) << 20;
}

/* MemAvailable in bytes, or -1.  RADIANCE_MEM_AVAILABLE (bytes) stands in
** for it, so the policy can be tried on any machine. */
static int64_t system_available(void)
{
    const char *forced = getenv("RADIANCE_MEM_AVAILABLE");
    if (forced && *forced) {
        char *end;
        long long v = strtoll(forced, &end, 10);
        if (*end == 0 && v >= 0) return v;  /* anything else is not a byte count: the system's figure */
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb >= 0 ? (int64_t)kb * 1024 : -1;
}

/* The memory limit of this process's cgroup (v1's memory controller or
** v2's memory.max), or -1 when there is none. */
static int64_t cgroup_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    char line[1024], path[1200];
    int64_t limit = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *rel = NULL;
        if (strncmp(line, "0::", 3) == 0) {
            rel = line + 3;
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", rel);
        } else if ((rel = strstr(line, ":memory:"))) {
            rel += 8;
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", rel);
        } else {
            continue;
        }
        FILE *g = fopen(path, "r");
        if (!g) continue;
        long long v;
        if (fscanf(g, "%lld", &v) == 1 && v > 0 && v < (INT64_C(1) << 60)) limit = v;    /* "max": none */
        fclose(g);
        if (limit > 0) break;
    }
    fclose(f);
    return limit;
}

static void choose_budget(RadResidency *r, int64_t asked)
{
    r->system_available = system_available();
    r->cgroup_limit = cgroup_limit();
    if (asked > 0) {
        r->budget = asked;
        r->budget_from = "--mem-budget";
        return;
    }
    int64_t memory = r->system_available;
    r->budget_from = "available memory";
    if (r->cgroup_limit > 0 && (memory < 0 || r->cgroup_limit < memory)) {
        memory = r->cgroup_limit;
        r->budget_from = "the cgroup's limit";
    }
    if (memory < 0) {
        r->budget = -1;
        r->budget_from = "unknown (no MemAvailable, no cgroup limit)";
        return;
    }
    r->floor = floor_for(memory);
    if (r->floor > memory / 2) r->floor = memory / 2;      /* a small machine keeps half for itself */
    r->budget = memory - r->floor;
}

int rad_residency_plan(RadEngine *e)
{
    RadResidency *r = &e->residency;
    RadBuilder *b = &e->b;
    choose_budget(r, e->opt.mem_budget);
    r->kv = e->kv.bytes;
    r->arena = e->arena_bytes;
    r->scratch = (int64_t)e->scratch_bytes;
    for (int i = 0; i < e->container->n_tensors; i++) r->weights_total += (int64_t)e->container->tensors[i].size;
    for (int i = 0; i < b->n_weights; i++) {
        const RadWeightEntry *w = &b->weights[i];
        if (!w->present || w->source || w->d.access != RAD_ACCESS_CONDITIONAL) continue;
        int64_t rows = 1;
        for (int d = 0; d + 1 < w->d.rank; d++) rows *= w->d.shape[d];
        r->experts += w->row_bytes * rows;
        r->n_expert_slices += w->d.n_slices > 0 ? w->d.n_slices : 1;
    }

    RadRelayoutList list;
    int rc = rad_relayout_list(b, &list);
    if (rc) return rc;
    /* Everything the file holds is read by some step (a dense model): that
    ** and the fixed part come first; copies fit in what is left. */
    int64_t need = r->weights_total + r->kv + r->arena + r->scratch;
    if (r->budget >= 0 && need > r->budget) {
        snprintf(r->why, sizeof r->why,
                 "the weights (%.2f GB) and the KV cache, arena and scratch (%.2f GB) exceed the budget of %.2f GB: "
                 "weights stay mapped and are read from the file as the system pages them; no copies",
                 r->weights_total / 1e9, (need - r->weights_total) / 1e9, r->budget / 1e9);
        for (int i = 0; i < list.n; i++) list.job[i].chosen = 0;
    } else {
        for (int i = 0; i < list.n; i++) {
            RadRelayoutJob *j = &list.job[i];
            int64_t delta = (int64_t)j->bytes - (j->releases ? j->stored_bytes : 0);
            j->chosen = r->budget < 0 || need + delta <= r->budget;
            if (j->chosen) need += delta;
        }
    }
    for (int i = 0; i < list.n; i++) {
        const RadRelayoutJob *j = &list.job[i];
        if (j->chosen) {
            r->copies += (int64_t)j->bytes;
            r->n_copies++;
            if (j->releases) r->weights_released += j->stored_bytes;
        } else {
            r->copies_skipped += (int64_t)j->bytes;
            r->n_skipped++;
        }
    }
    if (!r->why[0] && r->n_skipped)
        snprintf(r->why, sizeof r->why, "%d of %d copies (%.2f GB) left out: the budget of %.2f GB is full",
                 r->n_skipped, list.n, r->copies_skipped / 1e9, r->budget / 1e9);
    r->resident = need;
    rc = rad_relayout_make(b, e->pool, &list, e->opt.copies, &e->copies_later);
    rad_relayout_list_free(&list);
    return rc;
}

static void term(FILE *f, const char *what, int64_t bytes, const char *note)
{
    fprintf(f, "  %-28s%12lld bytes%s%s\n", what, (long long)bytes, note && *note ? "  " : "", note ? note : "");
}

void rad_residency_print(const RadEngine *e, FILE *f)
{
    const RadResidency *r = &e->residency;
    char note[400];
    if (r->budget >= 0)
        snprintf(note, sizeof note, "(from %s; %s%.2f GB available, cgroup limit %s)", r->budget_from,
                 r->floor ? "after a floor, of " : "", r->system_available / 1e9,
                 r->cgroup_limit > 0 ? "set" : "none");
    else
        snprintf(note, sizeof note, "(%s)", r->budget_from);
    term(f, "budget", r->budget, note);
    term(f, "weights in the file", r->weights_total, "(mapped read-only)");
    if (r->experts)
        snprintf(note, sizeof note, "(%d movement units, one per expert and projection; resident, mapped)",
                 r->n_expert_slices);
    term(f, "  of them routed experts", r->experts, r->experts ? note : "");
    term(f, "  given back after copying", r->weights_released, "(no op reads them as stored)");
    snprintf(note, sizeof note, "(%d kernel layouts%s%s)", r->n_copies, r->why[0] ? "; " : "", r->why);
    term(f, "relayouted weights", r->copies, note);
    term(f, "activation arena", r->arena, "");
    term(f, "KV cache", r->kv, "");
    term(f, "kernel scratch", r->scratch, "");
    term(f, "resident in all", r->resident, r->budget >= 0 && r->resident > r->budget ? "(over the budget)" : "");
}
