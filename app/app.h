/*
** app.h: what the radiance commands share: exit codes, the error printer,
** and the entry points of each command (one file per command).
*/
#ifndef RAD_APP_H
#define RAD_APP_H

#include "../engine/include/radiance.h"

/* Exit codes, documented in man/radiance.1. */
#define RAD_EXIT_OK 0
#define RAD_EXIT_FAILURE 1          /* anything not listed below */
#define RAD_EXIT_USAGE 2            /* bad flags or arguments */
#define RAD_EXIT_NOT_FOUND 3        /* the model or a file does not exist */
#define RAD_EXIT_INVALID 4          /* the model is malformed or unsupported */
#define RAD_EXIT_CONTEXT 5          /* the prompt does not fit the context */
#define RAD_EXIT_INTERRUPTED 130        /* SIGINT; other signals: 128 + the signal (interrupt.h) */

/* The model `radiance chat` talks to when none is named or configured. */
#define RAD_DEFAULT_CHAT_MODEL "qwen3:0.6b"

/* Print "radiance: <message>" for code and return the exit status for it. */
int rad_app_fail(int code);
/* Exit status for an engine error code. */
int rad_app_exit_code(int code);

int rad_cmd_run(int argc, char **argv);
int rad_cmd_convert(int argc, char **argv);
int rad_cmd_info(int argc, char **argv);
int rad_cmd_tokenize(int argc, char **argv);
int rad_cmd_perplexity(int argc, char **argv);
int rad_cmd_pull(int argc, char **argv);
int rad_cmd_list(int argc, char **argv);
int rad_cmd_rm(int argc, char **argv);
int rad_cmd_show(int argc, char **argv);
int rad_cmd_chat(int argc, char **argv);
/* Is a default model configured (so plain `radiance` on a terminal can chat)? */
int rad_chat_default_model_set(void);
int rad_cmd_bench(int argc, char **argv);
int rad_cmd_sessions(int argc, char **argv);
int rad_cmd_logs(int argc, char **argv);

#endif
