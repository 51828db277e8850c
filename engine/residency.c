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
**   experts    routed experts (access CONDITIONAL) are counted apart.  When
**              the whole model does not fit (or streaming is asked), and
**              the file stores each expert as a record (a .rad), they are
**              streamed (experts.c): never mapped in, read as routing picks
**              them into a cache of slots.  The copies of the dense part
**              are planned first, as if the cache were its least (one
**              layer's experts); the cache then takes what the budget has
**              left, in whole experts.  A budget that cannot hold the dense
**              part and that least is refused, naming the least.
**
** When the weights and the fixed part exceed the budget and the experts
** cannot be streamed (a dense model, or a GGUF's stacked experts), nothing
** is copied and the weights are read from the file as the system can page
** them (the plan and the mode line say so): the model runs, at the drive's
** speed.
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

static double gb(int64_t bytes) { return (double)bytes / 1e9; }

/* A size as a person reads it: "812 KB", "3.4 MB", "17.25 GB". */
typedef struct { char text[24]; } Size;
static Size size_of(int64_t bytes)
{
    Size s;
    if (bytes >= INT64_C(1000000000)) snprintf(s.text, sizeof s.text, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1000000) snprintf(s.text, sizeof s.text, "%.1f MB", bytes / 1e6);
    else snprintf(s.text, sizeof s.text, "%lld KB", (long long)((bytes + 999) / 1000));
    return s;
}

/* Whether the experts stream, and the reason told to the user: asked, or
** the whole model does not fit.  *x stays NULL when they do not. */
static int choose_streaming(RadEngine *e, RadExperts **x, char *why, size_t n)
{
    RadResidency *r = &e->residency;
    const int asked = e->opt.stream_experts;
    const int64_t all = r->weights_total + r->kv + r->arena + r->scratch;
    *x = NULL;
    if (asked == RAD_STREAM_OFF || !r->experts) return 0;
    if (asked == RAD_STREAM_ON)
        snprintf(why, n, "asked with --stream-experts");
    else if (r->budget >= 0 && all > r->budget)
        snprintf(why, n, "the model and its buffers, %s, do not fit the budget of %s from %s", size_of(all).text,
                 size_of(r->budget).text, r->budget_from);
    else
        return 0;
    int rc = rad_experts_open(e, x);
    if (rc == RAD_E_UNSUPPORTED && asked == RAD_STREAM_AUTO) {
        /* A GGUF's stacked experts: paged from the file, as a dense model is. */
        rad_error_clear();
        snprintf(r->mode, sizeof r->mode,
                 "weights paged from the file (%s); its experts are stacked tensors, which cannot stream: "
                 "`radiance convert %s -o MODEL.rad` makes a file whose experts do", why, e->opt.model_path);
        return 0;
    }
    return rc;
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

    char why_stream[200] = "";
    RadExperts *x = NULL;
    int rc = choose_streaming(e, &x, why_stream, sizeof why_stream);
    if (rc) return rc;
    e->experts = x;                     /* freed with the engine, whatever fails below */
    if (x && (rc = rad_trunk_read(e))) return rc;       /* before the copies: they read it */
    const int64_t slot = x ? rad_experts_slot_bytes(x) : 0, least = x ? slot * rad_experts_min_slots(x) : 0;
    const int64_t held = r->weights_total - (x ? r->experts : 0);     /* what stays mapped */
    const int64_t fixed = r->kv + r->arena + r->scratch;
    if (x && r->budget >= 0 && e->opt.expert_cache_bytes <= 0 && held + fixed + least > r->budget)
        return rad_error_set(RAD_E_NOMEM,
                             "%s: the memory budget of %s (from %s) cannot hold the model's dense part (%s), its KV "
                             "cache and buffers (%s) and one layer's experts (%s), the least that streams: it needs "
                             "%s (free memory, give a larger --mem-budget, or a smaller --ctx)",
                             e->opt.model_path, size_of(r->budget).text, r->budget_from, size_of(held).text,
                             size_of(fixed).text, size_of(least).text, size_of(held + fixed + least).text);

    RadRelayoutList list;
    rc = rad_relayout_list(b, &list);
    if (rc) return rc;
    /* The trunk in private memory gives nothing back after its copies
    ** (trunk.c says why): a copy costs its whole size. */
    if (x)
        for (int i = 0; i < list.n; i++) list.job[i].releases = 0;
    /* What stays mapped, the fixed part and the least expert cache come
    ** first; copies fit in what is left. */
    int64_t need = held + fixed + least;
    if (r->budget >= 0 && need > r->budget) {
        snprintf(r->why, sizeof r->why,
                 "the weights (%.2f GB) and the KV cache, arena and scratch (%.2f GB) exceed the budget of %.2f GB: "
                 "weights stay mapped and are read from the file as the system pages them; no copies",
                 gb(held), gb(fixed), gb(r->budget));
        for (int i = 0; i < list.n; i++) list.job[i].chosen = 0;
        if (!r->mode[0])
            snprintf(r->mode, sizeof r->mode, "weights paged from the file: %s of weights and %s of buffers do "
                     "not fit the budget of %s from %s", size_of(held).text, size_of(fixed).text,
                     size_of(r->budget).text, r->budget_from);
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
                 r->n_skipped, list.n, gb(r->copies_skipped), gb(r->budget));
    if (x) {
        /* The cache: as asked, else the rest of the budget in whole experts
        ** (all of them when the budget is unknown or has room). */
        int64_t slots = e->opt.expert_cache_bytes > 0 ? e->opt.expert_cache_bytes / slot
                      : r->budget >= 0 ? (r->budget - need + least) / slot : rad_experts_count(x);
        rc = rad_experts_start(x, e, slots);
        if (!rc) {
            r->expert_cache = rad_experts_slots(x) * slot;
            need += r->expert_cache - least;
            char how[240];
            rad_experts_describe(x, how, sizeof how);
            snprintf(r->mode, sizeof r->mode, "experts streamed from the file (%s): %s", why_stream, how);
        }
    }
    r->resident = need;
    if (!rc) rc = rad_relayout_make(b, e->pool, &list, e->opt.copies, &e->copies_later);
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
    snprintf(note, sizeof note, e->trunk ? "(the dense part, %llu bytes, read into memory; the rest never read)"
                                         : "(mapped read-only)", (unsigned long long)e->trunk_read);
    term(f, "weights in the file", r->weights_total, note);
    if (r->experts && e->experts)
        snprintf(note, sizeof note, "(%d slices; streamed: read as chosen into a cache of %s, never mapped in)",
                 r->n_expert_slices, size_of(r->expert_cache).text);
    else if (r->experts)
        snprintf(note, sizeof note, "(%d slices; resident, mapped)", r->n_expert_slices);
    term(f, "  of them routed experts", r->experts, r->experts ? note : "");
    term(f, "  given back after copying", r->weights_released, "(no op reads them as stored)");
    snprintf(note, sizeof note, "(%d kernel layouts%s%s)", r->n_copies, r->why[0] ? "; " : "", r->why);
    term(f, "relayouted weights", r->copies, note);
    term(f, "activation arena", r->arena, "");
    term(f, "KV cache", r->kv, "");
    term(f, "kernel scratch", r->scratch, "");
    term(f, "resident in all", r->resident, r->budget >= 0 && r->resident > r->budget ? "(over the budget)" : "");
}
