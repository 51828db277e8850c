/*
** cmd_chat.c: `radiance chat [MODEL]` (and plain `radiance` on a
** terminal): flags over the config, the model, the session to resume, and
** the choice of front end:
**
**   the full-screen TUI (tui.c)   when stdin and stdout are terminals
**   line mode (line_mode.c)       with --plain (config `plain`), TERM=dumb
**                                 or unset, or stdin or stdout not a terminal
**
** Everything that can fail before the conversation starts (a bad flag, a
** missing model, an unknown session) fails here, on stderr with the
** documented exit status, before any screen is drawn.
*/
#include "../app.h"
#include "../chat/chat.h"
#include "../config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: radiance chat [MODEL] [options]\n"
    "       radiance chat --continue | --resume ID [MODEL] [options]\n"
    "\n"
    "Talk with a model. On a terminal this is a full-screen UI: the transcript with\n"
    "markdown, a status line (context used, speed) and a multi-line input; /help\n"
    "there lists the commands and keys. Elsewhere (--plain, TERM=dumb, a pipe) it is\n"
    "a line mode with the same commands. Every chat is saved as it goes\n"
    "(radiance sessions); on exit the model's KV cache is stored too, so resuming\n"
    "costs no prefill. Ctrl-C stops a reply (the partial text is kept); a second\n"
    "Ctrl-C exits with status 130.\n"
    "\n"
    "MODEL is an alias, hf:ORG/REPO[@REV][:QUANT], or a path (.rad, .gguf, a Hugging\n"
    "Face folder); default: the config's `model`, a resumed session's model, else\n"
    "the default chat model " RAD_DEFAULT_CHAT_MODEL " (downloaded on first use).\n"
    "\n"
    "  -m, --model MODEL        the model\n"
    "      --continue           resume the most recent session\n"
    "  -r, --resume ID          resume session ID (a prefix is enough; see /sessions)\n"
    "      --plain              line mode instead of the full-screen UI\n"
    "  -s, --system TEXT        the system prompt\n"
    "      --think              ask the model to reason (when its format can say so)\n"
    "      --no-think           ask it not to (switch later with /think on|off)\n"
    "  -n, --n-predict N        most tokens per reply (default -1: until the model stops)\n"
    "      --temp T             temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K            keep the K most likely tokens (default 40; 0 = off)\n"
    "      --top-p P            nucleus mass (default 0.95; 1 = off)\n"
    "      --min-p P            drop tokens below P times the top probability (default 0.05)\n"
    "      --repeat-penalty R   penalty for recent tokens (default 1.0 = off)\n"
    "      --repeat-last-n N    how many recent tokens the penalty sees (default 64)\n"
    "      --seed S             sampling seed (default 0)\n"
    "  -c, --ctx N              context length (default: the model's, at most 4096)\n"
    "      --context-policy P   when the conversation outgrows the context: drop-oldest\n"
    "                           (default; drops the oldest turns, with a notice) or refuse\n"
    "      --reply-reserve N    room kept for a reply when -n is -1 (default min(512, ctx/4))\n"
    "  -b, --batch N            rows per prefill step (default 256)\n"
    "      --kv-dtype T         KV cache encoding: f16 (default) or f32\n"
    "      --mem-budget SIZE    memory the model may keep (e.g. 8G; default: what is available)\n"
    "      --stream-experts     read a MoE model's routed experts from the file as chosen (.rad;\n"
    "                           default: when the model does not fit the memory budget)\n"
    "      --no-stream-experts  never stream them: page them from the file\n"
    "      --expert-cache SIZE  memory for streamed experts (default: what the budget leaves)\n"
    "      --io-depth N         expert reads in flight at once (default 8; 0: one at a time)\n"
    "      --draft D            speculative decoding: ngram (prompt lookup) or a draft model\n"
    "                           with the same vocabulary; the output is the same, faster\n"
    "      --draft-max K        most tokens guessed per step (default 8, 1..16)\n"
    "      --kernels LIST       kernel library order (default: cpu,ref)\n"
    "  -t, --threads N          threads for the CPU kernels (default: the physical cores)\n"
    "      --plugins DIR        plugin folder\n"
    "      --color WHEN         auto (default), always or never; NO_COLOR turns it off\n"
    "      --offline            never use the network (as HF_HUB_OFFLINE=1)\n"
    "  -q, --quiet              no download or conversion progress\n"
    "  -h, --help               this help\n"
    "\n"
    "Input history: $XDG_STATE_HOME/radiance/history (default ~/.local/state/radiance/history).\n"
    "Exit status: 0 done, 2 usage, 3 model or session not found, 4 model invalid,\n"
    "130 interrupted. See radiance(1), CHAT.\n";

int rad_chat_default_model_set(void)
{
    RadSettings s;
    RadConfig *cfg = NULL;
    int set = rad_settings_load(&s, &cfg) == RAD_OK && s.model && s.model[0];
    rad_config_free(cfg);
    return set;
}

/* Does this terminal allow the full-screen UI? */
static int full_screen_possible(void)
{
    const char *term = getenv("TERM");
    if (!term || !term[0] || !strcmp(term, "dumb")) return 0;
    return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
}

int rad_cmd_chat(int argc, char **argv)
{
    enum { PLAIN = 256, CONTINUE };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"continue", no_argument, 0, CONTINUE},
        {"resume", required_argument, 0, 'r'}, {"plain", no_argument, 0, PLAIN},
        {"system", required_argument, 0, 's'}, RAD_SETTINGS_OPTIONS,
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    RadChat chat;
    memset(&chat, 0, sizeof chat);
    chat.t_start_ms = rad_now_ms();
    RadSettings s;
    RadConfig *cfg = NULL;
    int rc = rad_settings_load(&s, &cfg), c;
    if (rc) return rad_app_fail(rc);
    const char *model_flag = NULL, *resume = NULL;
    int want_continue = 0;
    optind = 1;
    while (rc == RAD_OK && (c = getopt_long(argc, argv, "m:r:s:n:c:b:t:qh", options, NULL)) != -1) {
        switch (c) {
        case 'm': model_flag = optarg; break;
        case CONTINUE: want_continue = 1; break;
        case 'r': resume = optarg; break;
        case PLAIN: s.plain = 1; break;
        case 's': s.system = optarg; break;
        case 'h': fputs(usage, stdout); rad_config_free(cfg); return RAD_EXIT_OK;
        default:
            if (rad_settings_option(&s, c, optarg, &rc)) break;
            fputs(usage, stderr);
            rad_config_free(cfg);
            return RAD_EXIT_USAGE;
        }
    }
    if (rc == RAD_OK) rc = rad_sampler_check(&s.conv.sampler);
    if (rc) {
        rc = rad_app_fail(rc);
        rad_config_free(cfg);
        return rc;
    }
    const char *problem = NULL;
    if (!model_flag && optind < argc) model_flag = argv[optind++];
    if (optind < argc) problem = "one MODEL at most (the conversation starts in the chat itself)";
    else if (want_continue && resume) problem = "--continue or --resume ID, not both";
    if (problem) {
        fprintf(stderr, "radiance chat: %s\n", problem);
        rad_config_free(cfg);
        return RAD_EXIT_USAGE;
    }
    chat.settings = &s;
    int status = RAD_EXIT_OK;
    char *session_model = NULL;

    /* The session first: a resumed chat defaults to the model it was held with. */
    if (want_continue || resume) {
        if ((rc = rad_sdb_open(NULL, &chat.db))) goto done;
        rc = resume ? rad_session_resolve(chat.db, resume, chat.resume_id) : rad_session_latest(chat.db, chat.resume_id);
        if (rc == RAD_E_NOTFOUND && !resume) rc = rad_error_set(RAD_E_NOTFOUND, "no saved session to continue");
        if (rc) goto done;
        RadSession info;
        if (rad_session_get(chat.db, chat.resume_id, &info) == RAD_OK) {
            if (info.model_name[0]) session_model = strdup(info.model_name);
            rad_session_free(&info);
        }
    }
    /* No model named or configured: the default chat model (radiance(1)),
    ** downloaded on first use like any alias. */
    const char *spec = model_flag ? model_flag : s.model ? s.model : session_model ? session_model : RAD_DEFAULT_CHAT_MODEL;
    if (spec == (const char *)RAD_DEFAULT_CHAT_MODEL && !s.quiet)
        fprintf(stderr, "radiance: no model named or configured: talking to the default chat model, %s\n",
                RAD_DEFAULT_CHAT_MODEL);
    if (!(chat.model_spec = strdup(spec))) {
        rc = RAD_E_NOMEM;
        goto done;
    }
    if ((rc = rad_chat_open_model(&chat))) goto done;
    status = (s.plain || !full_screen_possible()) ? rad_line_mode_run(&chat) : rad_tui_run(&chat);

done:
    if (rc) status = rad_app_fail(rc);
    rad_chat_close(&chat);
    free(chat.model_spec);
    free(session_model);
    rad_config_free(cfg);
    return status;
}
