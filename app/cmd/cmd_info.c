/*
** cmd_info.c: `radiance info --plugins | --kernels | --graph MODEL`: what is
** installed, and the whole resolved program of a model (every op, its
** kernel per band and why) with its memory plan.
*/
#include "../app.h"

#include <getopt.h>
#include <stdio.h>

static const char usage[] =
    "usage: radiance info --plugins | --kernels | --graph MODEL [--kernels-order LIST]\n"
    "\n"
    "  --plugins            list the architecture plugins and the formats they serve\n"
    "  --kernels            list the kernel libraries and their rows\n"
    "  --graph MODEL        print the model's ops, the kernel chosen for each band, and the memory plan\n"
    "  --kernels-order LIST library order for --graph (default: every installed library, most\n"
    "                       preferred first: cpu,ref with the cpu library)\n"
    "  --plugins-dir DIR    plugin folder\n";

int rad_cmd_info(int argc, char **argv)
{
    enum { PLUGINS = 1, KERNELS, GRAPH, ORDER, DIR };
    static const struct option options[] = {
        {"plugins", no_argument, 0, PLUGINS}, {"kernels", no_argument, 0, KERNELS},
        {"graph", required_argument, 0, GRAPH}, {"kernels-order", required_argument, 0, ORDER},
        {"plugins-dir", required_argument, 0, DIR}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int what = 0, c;
    const char *model = NULL, *order = NULL, *dir = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case PLUGINS: case KERNELS: what = c; break;
        case GRAPH: what = c; model = optarg; break;
        case ORDER: order = optarg; break;
        case DIR: dir = optarg; break;
        case 'h': fputs(usage, stdout); return RAD_EXIT_OK;
        default: fputs(usage, stderr); return RAD_EXIT_USAGE;
        }
    }
    int rc;
    if (what == PLUGINS) rc = rad_list_plugins(dir, stdout);
    else if (what == KERNELS) rc = rad_list_kernels(dir, stdout);
    else if (what == GRAPH) {
        RadEngineOptions opt = {.model_path = model, .plugin_dir = dir, .kernels = order,
                                .debug_graph = stdout, .debug_plan = stdout};
        RadEngine *e = NULL;
        rc = rad_engine_open(&opt, &e);
        rad_engine_close(e);
    } else {
        fputs(usage, stderr);
        return RAD_EXIT_USAGE;
    }
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
