/*
** cmd_rm.c: `radiance rm MODEL [--quant Q] [--purge]`: remove converted
** models from the store and, with --purge, what was downloaded for them
** from the Hugging Face cache (the snapshot of the converted commit, the
** blobs no other snapshot links, the refs pointing at it).
*/
#include "../app.h"
#include "../cli.h"
#include "../models/hub.h"
#include "../models/model_store.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char usage[] =
    "usage: radiance rm MODEL [--quant Q] [--purge]\n"
    "\n"
    "Remove a model from the store (every quantization of it unless --quant names one). MODEL is\n"
    "a name that radiance list shows, or the spec it was pulled with. A GGUF run in place from\n"
    "the Hugging Face cache stays there unless --purge.\n"
    "\n"
    "      --quant Q   remove only this quantization\n"
    "      --purge     also remove its downloads from the Hugging Face cache: the snapshot, its\n"
    "                  blobs that no other snapshot links, and the refs to it\n"
    "  -h, --help      this help\n";

/* (repo, commit) pairs to purge. */
typedef struct Purge {
    char repo[200];
    char commit[RAD_HF_COMMIT_LEN + 1];
} Purge;

static int still_used(const RadStoredModel *rows, const int *gone, int n, const Purge *p)
{
    for (int i = 0; i < n; i++)
        if (!gone[i] && !strcmp(rows[i].source, p->repo) && !strcmp(rows[i].commit_sha, p->commit)) return i;
    return -1;
}

static int purge(const RadStoredModel *rows, const int *gone, int n, const Purge *list, int np)
{
    RadHfCache cache;
    int rc = rad_hf_cache_init(&cache);
    for (int i = 0; i < np && !rc; i++) {
        const Purge *p = &list[i];
        int dup = 0;
        for (int k = 0; k < i; k++)
            dup |= !strcmp(list[k].repo, p->repo) && !strcmp(list[k].commit, p->commit);
        if (dup) continue;
        int user = still_used(rows, gone, n, p);
        if (user >= 0) {
            fprintf(stderr, "radiance: kept %s@%.12s in the cache: %s (%s) %s\n", p->repo, p->commit,
                    rad_safe(rows[user].name), rad_safe(rows[user].quant),
                    rad_store_cache_path(rows[user].file) ? "runs from it" : "was converted from it");
            continue;
        }
        uint64_t freed = 0;
        int prc = rad_hf_purge(&cache, p->repo, p->commit, &freed);
        char b[32];
        if (prc == RAD_E_NOTFOUND)
            fprintf(stderr, "radiance: %s@%.12s is not in the cache\n", p->repo, p->commit);
        else if (prc)
            rc = prc;
        else
            fprintf(stderr, "radiance: purged %s@%.12s from %s (%s freed)\n", p->repo, p->commit, cache.hub,
                    rad_hub_format_bytes((int64_t)freed, b, sizeof b));
    }
    rad_hf_cache_free(&cache);
    return rc;
}

int rad_cmd_rm(int argc, char **argv)
{
    enum { PURGE = 256 };
    static const struct option options[] = {
        {"quant", required_argument, 0, 'Q'}, /* long only: -q is --quiet in every command */
        {"purge", no_argument, 0, PURGE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *quant = NULL;
    int c, do_purge = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'Q':
            quant = optarg;
            break;
        case PURGE:
            do_purge = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return RAD_EXIT_OK;
        default:
            fputs(usage, stderr);
            return RAD_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "radiance rm: give one MODEL\n%s", usage);
        return RAD_EXIT_USAGE;
    }
    const char *text = argv[optind];
    RadStore *store = NULL;
    RadStoredModel *rows = NULL;
    RadModelSpec *spec = calloc(1, sizeof *spec);
    int *gone = NULL, n = 0, np = 0, removed = 0;
    Purge *plist = NULL;
    int rc = spec ? rad_store_open_existing(&store) : rad_error_set(RAD_E_NOMEM, "out of memory");
    if (!rc) rc = rad_store_list(store, &rows, &n);
    if (rc) goto done;
    gone = calloc((size_t)n + 1, sizeof *gone);
    plist = calloc((size_t)n + 1, sizeof *plist);
    if (!gone || !plist) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto done;
    }

    /* The name as listed; else the name the spec gives. */
    const char *name = text;
    int have_spec = rad_model_spec_parse(text, spec) == RAD_OK;
    rad_error_clear();
    int any = 0;
    for (int i = 0; i < n; i++) any |= !strcmp(rows[i].name, text);
    if (!any && have_spec) {
        name = spec->name;
        if (!quant && spec->quant_from_spec) quant = spec->quant;
    }
    for (int i = 0; i < n; i++) {
        RadStoredModel *m = &rows[i];
        if (strcmp(m->name, name) != 0 || (quant && strcasecmp(m->quant, quant) != 0)) continue;
        /* A GGUF run in place is the cache's file, not ours: --purge takes it */
        int in_cache = rad_store_cache_path(m->file) != NULL;
        if (!in_cache && unlink(m->path) != 0 && errno != ENOENT) {
            rc = rad_error_set(RAD_E_IO, "%s: cannot remove: %s", m->path, strerror(errno));
            goto done;
        }
        if ((rc = rad_store_delete(store, m->name, m->quant))) goto done;
        gone[i] = 1;
        removed++;
        if (in_cache && !do_purge)
            fprintf(stderr, "radiance: removed %s (%s); kept its download %s (rm --purge removes it)\n",
                    rad_safe(m->name), rad_safe(m->quant), rad_safe(m->path));
        else
            fprintf(stderr, "radiance: removed %s (%s): %s\n", rad_safe(m->name), rad_safe(m->quant),
                    rad_safe(m->path));
        if (m->commit_sha[0] && rad_hf_repo_id_ok(m->source)) {
            snprintf(plist[np].repo, sizeof plist[np].repo, "%s", m->source);
            snprintf(plist[np].commit, sizeof plist[np].commit, "%s", m->commit_sha);
            np++;
        }
    }
    if (!removed && !(do_purge && have_spec && spec->kind == RAD_SPEC_HUB)) {
        rc = rad_error_set(RAD_E_NOTFOUND, "%s%s%s: not in the model store (radiance list shows what is)",
                           text, quant ? " --quant " : "", quant ? quant : "");
        goto done;
    }
    if (do_purge && !removed) {
        /* Nothing converted, but downloads may be cached: the commit the
        ** spec's revision names (a commit, or what refs/ recorded). */
        RadHfCache cache;
        if ((rc = rad_hf_cache_init(&cache))) goto done;
        snprintf(plist[0].repo, sizeof plist[0].repo, "%s", spec->repo);
        if (rad_hf_is_commit(spec->revision))
            memcpy(plist[0].commit, spec->revision, RAD_HF_COMMIT_LEN + 1);
        else
            rc = rad_hf_ref_read(&cache, spec->repo, spec->revision, plist[0].commit);
        rad_hf_cache_free(&cache);
        if (rc) {
            rc = rad_error_set(RAD_E_NOTFOUND, "%s: neither converted nor in the Hugging Face cache", text);
            goto done;
        }
        np = 1;
    }
    if (do_purge) rc = purge(rows, gone, n, plist, np);
done:
    rad_stored_models_free(rows, n);
    rad_store_close(store);
    free(gone);
    free(plist);
    free(spec);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
