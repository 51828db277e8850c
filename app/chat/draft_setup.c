/*
** draft_setup.c: turning --draft into a drafter (draft_setup.h).
*/
#include "draft_setup.h"

#include <stdlib.h>
#include <string.h>

#include "../models/model_store.h"

int rad_draft_open(const char *spec, const RadEngine *target, const RadEngineOptions *base, int offline, int quiet,
                   RadDrafter *out, RadEngine **draft_engine)
{
    *draft_engine = NULL;
    if (!spec || !*spec) return rad_error_set(RAD_E_ARG, "--draft: name a drafter (ngram, or a model)");
    if (!strcmp(spec, "ngram")) {
        const RadNgramParams p = {.min_n = 2, .max_n = 4};
        return rad_draft_ngram(&p, out);
    }
    if (!strcmp(spec, "mtp"))
        return rad_error_set(RAD_E_UNSUPPORTED, "--draft mtp: %s has no multi-token-prediction layers that radiance "
                             "serves", rad_engine_meta(target)->name);
    RadResolveOptions resolve = {.offline = offline, .quiet = quiet, .plugin_dir = base->plugin_dir};
    char *path = NULL;
    int rc = rad_model_resolve(spec, &resolve, &path);
    if (rc) return rad_error_prefix(rc, "--draft %s: ", spec);
    RadEngineOptions opt = *base;
    opt.model_path = path;
    opt.max_spec = 0;
    opt.logits_all = 0;
    opt.debug_graph = opt.debug_plan = NULL;
    if (opt.max_ctx <= 0) opt.max_ctx = rad_engine_max_ctx(target);
    RadEngine *e = NULL;
    rc = rad_engine_open(&opt, &e);
    free(path);
    if (rc) return rad_error_prefix(rc, "--draft %s: ", spec);
    if ((rc = rad_draft_model(e, target, out))) {
        rad_engine_close(e);
        return rc;
    }
    *draft_engine = e;
    return RAD_OK;
}
