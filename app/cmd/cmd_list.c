/*
** cmd_list.c: `radiance list [--json]`: the converted models in the store,
** then the downloads left unfinished in the Hugging Face cache (resumed by
** the next pull of their model).
*/
#include "../app.h"
#include "../cli.h"
#include "../models/hub.h"
#include "../models/model_store.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: radiance list [--json]\n"
    "\n"
    "List the converted models (name, source, quantization, size, last use) and the partial\n"
    "downloads in the Hugging Face cache.\n"
    "\n"
    "  --json      one JSON object: {\"models\": [...], \"partial\": [...]}\n"
    "  -h, --help  this help\n";

/* "never", "just now", "5 minutes ago", ..., or the date after a week. */
static const char *when(int64_t t, char *buf, size_t cap)
{
    if (!t) return "never";
    int64_t ago = (int64_t)time(NULL) - t;
    if (ago < 60)
        snprintf(buf, cap, "just now");
    else if (ago < 3600)
        snprintf(buf, cap, "%lld minute%s ago", (long long)ago / 60, ago < 120 ? "" : "s");
    else if (ago < 86400)
        snprintf(buf, cap, "%lld hour%s ago", (long long)ago / 3600, ago < 7200 ? "" : "s");
    else if (ago < 7 * 86400)
        snprintf(buf, cap, "%lld day%s ago", (long long)ago / 86400, ago < 2 * 86400 ? "" : "s");
    else {
        time_t tt = (time_t)t;
        struct tm tm;
        localtime_r(&tt, &tm);
        strftime(buf, cap, "%Y-%m-%d", &tm);
    }
    return buf;
}

static int print_json(const RadStoredModel *rows, int n, const RadHfPartial *parts, int np)
{
    json_t *root = json_object(), *models = json_array(), *partial = json_array();
    for (int i = 0; i < n; i++) {
        const RadStoredModel *m = &rows[i];
        json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s,s:I,s:b}", "name", m->name, "quant", m->quant,
                              "source", m->source, "revision", m->revision, "commit", m->commit_sha, "path",
                              m->path, "size", (json_int_t)m->size, "sha256", m->sha256, "created",
                              (json_int_t)m->created, "present", access(m->path, R_OK) == 0);
        if (o) json_object_set_new(o, "last_used", m->last_used ? json_integer(m->last_used) : json_null());
        json_array_append_new(models, o);
    }
    for (int i = 0; i < np; i++) {
        const RadHfPartial *p = &parts[i];
        json_t *o =
            json_pack("{s:s,s:s,s:I}", "source", p->repo, "etag", p->etag, "bytes", (json_int_t)p->bytes);
        if (o) {
            json_object_set_new(o, "file", p->path ? json_string(p->path) : json_null());
            json_object_set_new(o, "size", p->size >= 0 ? json_integer(p->size) : json_null());
        }
        json_array_append_new(partial, o);
    }
    json_object_set_new(root, "models", models);
    json_object_set_new(root, "partial", partial);
    int rc = json_dumpf(root, stdout, JSON_INDENT(2)) == 0 && fputc('\n', stdout) != EOF
                 ? RAD_OK
                 : rad_error_set(RAD_E_IO, "cannot write to stdout");
    json_decref(root);
    return rc;
}

static void print_text(const RadStoredModel *rows, int n, const RadHfPartial *parts, int np)
{
    char size[32], used[48];
    if (n) printf("%-28s %-36s %-6s %10s  %s\n", "NAME", "SOURCE", "QUANT", "SIZE", "LAST USED");
    for (int i = 0; i < n; i++) {
        const RadStoredModel *m = &rows[i];
        char source[128];
        if (m->commit_sha[0])
            snprintf(source, sizeof source, "%s@%.7s", m->source, m->commit_sha);
        else
            snprintf(source, sizeof source, "%s", m->source);
        printf("%-28s %-36s %-6s %10s  %s%s\n", rad_safe(m->name), rad_safe(source), rad_safe(m->quant),
               rad_hub_format_bytes(m->size, size, sizeof size), when(m->last_used, used, sizeof used),
               access(m->path, R_OK) == 0 ? "" : "  (file missing: pull again)");
    }
    if (np) printf("%spartial downloads (radiance pull resumes them):\n", n ? "\n" : "");
    for (int i = 0; i < np; i++) {
        const RadHfPartial *p = &parts[i];
        char have[32], total[32];
        rad_hub_format_bytes(p->bytes, have, sizeof have);
        if (p->size > 0)
            printf("  %-36s %-40s %s of %s (%d%%)\n", rad_safe(p->repo), rad_safe(p->path ? p->path : p->etag), have,
                   rad_hub_format_bytes(p->size, total, sizeof total),
                   (int)(100.0 * (double)p->bytes / (double)p->size));
        else
            printf("  %-36s %-40s %s\n", rad_safe(p->repo), rad_safe(p->path ? p->path : p->etag), have);
    }
}

int rad_cmd_list(int argc, char **argv)
{
    enum { JSON = 256 };
    static const struct option options[] = {
        {"json", no_argument, 0, JSON},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c, json = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case JSON:
            json = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return RAD_EXIT_OK;
        default:
            fputs(usage, stderr);
            return RAD_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "radiance list: unexpected '%s'\n%s", argv[optind], usage);
        return RAD_EXIT_USAGE;
    }
    RadStore *store = NULL;
    RadStoredModel *rows = NULL;
    RadHfPartial *parts = NULL;
    RadHfCache cache = {0};
    int n = 0, np = 0;
    int rc = rad_store_open_existing(&store); /* reading makes nothing */
    if (!rc) rc = rad_store_list(store, &rows, &n);
    if (!rc) rc = rad_hf_cache_init(&cache);
    if (!rc) rc = rad_hf_scan_partials(&cache, &parts, &np);
    if (!rc) {
        if (json)
            rc = print_json(rows, n, parts, np);
        else if (n + np == 0)
            fputs("radiance: no models yet; radiance pull MODEL converts one\n", stderr);
        else
            print_text(rows, n, parts, np);
    }
    rad_hf_partials_free(parts, np);
    rad_hf_cache_free(&cache);
    rad_stored_models_free(rows, n);
    rad_store_close(store);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
