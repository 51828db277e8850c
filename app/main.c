/*
** main.c: the radiance binary's front door: dispatch to a command, print
** help and version, turn engine error codes into one-line messages and
** documented exit statuses.
*/
#include "app.h"
#include "cli.h"
#include "interrupt.h"

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
    "  run [MODEL] [PROMPT...]            answer one prompt (chat format; --raw: as is); stdin too\n"
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
    "  logs [SUBCOMMAND]                  logged run exchanges: list, show [ID], search TEXT, rm ID\n"
    "  help COMMAND                       a command's help (as COMMAND --help)\n"
    "\n"
    "options:\n"
    "  -h, --help      this help; radiance help COMMAND for a command's\n"
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
    /* Messages quote file names, metadata and model text: shown safely. */
    const char *msg = rad_error_message();
    fprintf(stderr, "radiance: %s\n", rad_safe(msg[0] ? msg : rad_strerror(code)));
    return rad_app_exit_code(code);
}

typedef int (*CommandFn)(int argc, char **argv);

static const struct {
    const char *name;
    CommandFn run;
} commands[] = {
    {"run", rad_cmd_run},       {"chat", rad_cmd_chat},         {"convert", rad_cmd_convert},
    {"info", rad_cmd_info},     {"tokenize", rad_cmd_tokenize}, {"perplexity", rad_cmd_perplexity},
    {"pull", rad_cmd_pull},     {"list", rad_cmd_list},         {"rm", rad_cmd_rm},
    {"show", rad_cmd_show},     {"bench", rad_cmd_bench},       {"sessions", rad_cmd_sessions},
    {"logs", rad_cmd_logs},
};

static CommandFn find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(commands[i].name, name)) return commands[i].run;
    return NULL;
}

/* `radiance help CMD`: CMD's own --help. */
static int help_for(const char *name)
{
    CommandFn run = find_command(name);
    if (!run) {
        fprintf(stderr, "radiance: unknown command '%s' (radiance --help lists them)\n", rad_safe(name));
        return RAD_EXIT_USAGE;
    }
    char help_flag[] = "--help";
    char *argv[] = {(char *)name, help_flag, NULL};
    return run(2, argv);
}

static int dispatch(int argc, char **argv)
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
    if (!strcmp(cmd, "help") && argc > 2) return help_for(argv[2]);
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return RAD_EXIT_OK;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("radiance %s\n", RAD_VERSION);
        return RAD_EXIT_OK;
    }
    CommandFn run = find_command(cmd);
    if (run) return run(argc - 1, argv + 1);
    fprintf(stderr, "radiance: unknown command '%s'\n%s", rad_safe(cmd), usage);
    return RAD_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* One interrupt model (interrupt.h): until a command arms it, a signal
    ** removes partial files and exits 128 + the signal. */
    rad_interrupt_install();
    /* Whatever the command, output that did not arrive is a failure. */
    return rad_out_finish(dispatch(argc, argv));
}
