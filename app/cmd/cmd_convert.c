/*
** cmd_convert.c: `radiance convert DIR -o OUT.rad [--quant Q]`.
*/
#include "../app.h"
#include "../../formats/gguf_container.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char usage[] =
    "usage: radiance convert DIR -o OUT.rad [--quant Q]\n"
    "       radiance convert FILE.gguf -o OUT.rad\n"
    "\n"
    "Convert a Hugging Face model folder (config.json, safetensors, tokenizer files)\n"
    "into a .rad container; a GGUF file (known by its content, whatever its name) is\n"
    "copied as stored (no requantization). Nothing is written at OUT.rad unless\n"
    "conversion succeeds.\n"
    "\n"
    "  -o, --output FILE   the .rad file to write (required)\n"
    "      --quant Q       the weights' encoding: f32, f16, bf16 (the default: nothing lost),\n"
    "                      q8_0, q4_k, q4_0, or one of llama.cpp's mixes: q6_k, q5_k_m, q5_k_s,\n"
    "                      q4_k_m, q4_k_s (any case); norms and biases stay f32\n"
    "  -q, --quiet         no progress lines, only errors\n"
    "      --plugins DIR   plugin folder (default: $RADIANCE_HOME/plugins or beside the binary)\n"
    "  -h, --help          this help\n";

int rad_cmd_convert(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, 0, 'o'}, {"quant", required_argument, 0, 'Q'}, {"quiet", no_argument, 0, 'q'},
        {"plugins", required_argument, 0, 'P'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *out = NULL, *quant = NULL, *plugins = NULL;
    int c, quiet = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qh", options, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'Q': quant = optarg; break;
        case 'q': quiet = 1; break;
        case 'P': plugins = optarg; break;
        case 'h': fputs(usage, stdout); return RAD_EXIT_OK;
        default: fputs(usage, stderr); return RAD_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !out) {
        fprintf(stderr, "radiance convert: %s\n%s", !out ? "-o OUT.rad is required" : "give one model folder",
                usage);
        return RAD_EXIT_USAGE;
    }
    const char *src = argv[optind];
    struct stat st;
    int rc, kind = stat(src, &st) == 0 && S_ISDIR(st.st_mode) ? RAD_FILE_OTHER : rad_model_file_kind(src);
    if (kind < 0) return rad_app_fail(kind);
    if (kind == RAD_FILE_GGUF) {
        if (quant) {
            fprintf(stderr, "radiance convert: a GGUF is copied as stored; --quant does not apply\n");
            return RAD_EXIT_USAGE;
        }
        rc = rad_convert_gguf(src, out, quiet ? NULL : stderr);
    } else {
        rc = rad_convert_hf(src, out, quant ? quant : "bf16", plugins, quiet ? NULL : stderr);
    }
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
