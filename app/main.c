/*
** main.c: the radiance binary's front door: dispatch to a command, print
** help and version, turn engine error codes into one-line messages and
** documented exit statuses.
*/
#include "app.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef RAD_VERSION
#define RAD_VERSION "0.1.0"
#endif

static const char usage[] =
    "usage: radiance COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  chat [MODEL]                       talk with a model (full-screen on a terminal; --plain)\n"
    "  run MODEL [PROMPT...]              answer one prompt (chat format; --raw: as is); stdin too\n"
    "  convert DIR -o OUT.rad [--quant Q]  convert a Hugging Face folder into a .rad model\n"
    "  info --plugins | --kernels | --graph MODEL\n"
    "                                     list plugins and kernels, or print a model's program\n"
    "  pull MODEL [--quant Q]             download (resuming, verified) and convert a model\n"
    "  list [--json]                      converted models and partial downloads\n"
    "  rm MODEL [--purge]                 remove a converted model (and its downloads)\n"
    "  show MODEL                         a converted model's source, sizes and encodings\n"
    "  tokenize -m MODEL [TEXT...]        token ids of a text (--decode IDS for the reverse)\n"
    "  perplexity -m MODEL -f FILE        teacher-forced perplexity, as llama.cpp measures it\n"
    "  bench -m MODEL [-p N] [-n N]       prompt and generation throughput, as llama-bench measures it\n"
    "  sessions [SUBCOMMAND]              saved chats: list, show ID, search TEXT, rm ID, export ID\n"
    "\n"
    "options:\n"
    "  -h, --help      this help; COMMAND --help for a command's\n"
    "  -V, --version   print the version\n"
    "\n"
    "Plugins are found in $RADIANCE_HOME/plugins, else beside the binary.\n"
    "See radiance(1).\n";

int rad_app_exit_code(int code)
{
    switch (code) {
    case RAD_OK: return RAD_EXIT_OK;
    case RAD_E_ARG: return RAD_EXIT_USAGE;
    case RAD_E_NOTFOUND: return RAD_EXIT_NOT_FOUND;
    case RAD_E_FORMAT:
    case RAD_E_UNSUPPORTED:
    case RAD_E_NOKERNEL:
    case RAD_E_SHAPE:
    case RAD_E_ABI: return RAD_EXIT_INVALID;
    case RAD_E_RANGE: return RAD_EXIT_CONTEXT;
    case RAD_E_INTERRUPT: return RAD_EXIT_INTERRUPTED;
    }
    return RAD_EXIT_FAILURE;
}

int rad_app_fail(int code)
{
    const char *msg = rad_error_message();
    fprintf(stderr, "radiance: %s\n", msg[0] ? msg : rad_strerror(code));
    return rad_app_exit_code(code);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        /* on a terminal, with a default model configured: chat */
        if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && rad_chat_default_model_set()) {
            static char chat_name[] = "chat";
            char *chat_argv[] = {chat_name, NULL};
            return rad_cmd_chat(1, chat_argv);
        }
        fputs(usage, stderr);
        return RAD_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return RAD_EXIT_OK;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("radiance %s\n", RAD_VERSION);
        return RAD_EXIT_OK;
    }
    if (!strcmp(cmd, "run")) return rad_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return rad_cmd_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "convert")) return rad_cmd_convert(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return rad_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return rad_cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return rad_cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(cmd, "pull")) return rad_cmd_pull(argc - 1, argv + 1);
    if (!strcmp(cmd, "list")) return rad_cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "rm")) return rad_cmd_rm(argc - 1, argv + 1);
    if (!strcmp(cmd, "show")) return rad_cmd_show(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return rad_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "sessions")) return rad_cmd_sessions(argc - 1, argv + 1);
    fprintf(stderr, "radiance: unknown command '%s'\n%s", cmd, usage);
    return RAD_EXIT_USAGE;
}
