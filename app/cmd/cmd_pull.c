/*
** cmd_pull.c: `radiance pull MODEL`: download (or find in the cache) and
** convert a model without running it.  The work is rad_model_resolve's;
** this file reads the flags and reports the outcome.
*/
#include "../app.h"
#include "../cli.h"
#include "../models/model_store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static const char usage[] =
    "usage: radiance pull MODEL [--quant Q] [--offline] [--quiet]\n"
    "\n"
    "Download MODEL into the Hugging Face cache (resuming, verifying every file) and convert it\n"
    "into the model store; a GGUF repository's file is run where the cache keeps it, with no\n"
    "conversion. MODEL is an alias (qwen3:0.6b), hf:ORG/REPO[@REV][:QUANT] (or hf.co/ORG/REPO),\n"
    "or a local Hugging Face folder. A model already pulled from the commit the revision names\n"
    "now is left as it is.\n"
    "\n"
    "      --quant Q     safetensors: what to convert to, q4_k_m (the default), q4_k_s, q5_k_m,\n"
    "                    q5_k_s, q6_k (llama.cpp's mixes), q8_0, q4_k, q4_0, bf16, f16 or f32;\n"
    "                    GGUF: which file, by the quant in its name (default Q4_K_M, else Q8_0)\n"
    "      --offline     use only the cache, never the network (as HF_HUB_OFFLINE=1)\n"
    "  -q, --quiet       no progress lines, only errors\n"
    "      --plugins DIR plugin folder for the converter\n"
    "  -h, --help        this help\n";

int rad_cmd_pull(int argc, char **argv)
{
    enum { OFFLINE = 256, PLUGINS };
    static const struct option options[] = {
        {"quant", required_argument, 0, 'Q'}, {"offline", no_argument, 0, OFFLINE},
        /* -q is --quiet in every command; --quant is long only */
        {"quiet", no_argument, 0, 'q'},       {"plugins", required_argument, 0, PLUGINS},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    RadResolveOptions o = {.pull = 1, .log = stderr};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
        switch (c) {
        case 'Q':
            o.quant = optarg;
            break;
        case 'q':
            o.quiet = 1;
            break;
        case OFFLINE:
            o.offline = 1;
            break;
        case PLUGINS:
            o.plugin_dir = optarg;
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
        fprintf(stderr, "radiance pull: give one MODEL\n%s", usage);
        return RAD_EXIT_USAGE;
    }
    RadResolved r;
    int rc = rad_model_resolve_ex(argv[optind], &o, &r);
    if (rc) return rad_app_fail(rc);
    if (!o.quiet && !r.converted && r.name[0] == 0)
        fprintf(stderr, "radiance: %s is a .rad file already\n", rad_safe(r.path));
    free(r.path);
    return RAD_EXIT_OK;
}
