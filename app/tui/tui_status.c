/*
** tui_status.c: the status line between the transcript and the input:
**
**   SmolLM2 · ctx 1234/2048 60% · 31.2 tok/s · first token 85 ms · prompt 310, 12 evaluated     ready
**
** The context meter is never dropped and turns to a warning before the
** conversation overflows (the next reply would make the context policy drop
** turns), so the user sees it coming; the other parts give way, least
** important first, on a narrow terminal.
*/
#include "tui.h"

#include <stdio.h>
#include <string.h>

typedef struct Part {
    char text[160];
    RadStyle style;
    int priority;               /* lower stays longer */
} Part;

void rad_status_line(RadRich *r, const RadStatusInfo *s, int width)
{
    const RadStyle bar = RAD_STYLE(RAD_ROLE_NONE, RAD_ST_REVERSE);
    Part parts[8];
    int n = 0;
    snprintf(parts[n].text, sizeof parts[n].text, " %s", s->model ? s->model : "");
    parts[n].style = RAD_STYLE(RAD_ROLE_NONE, RAD_ST_REVERSE | RAD_ST_BOLD);
    parts[n++].priority = 2;

    int pct = s->ctx_size > 0 ? (int)(100.0 * s->ctx_used / s->ctx_size + 0.5) : 0;
    if (s->ctx_level == 2)
        snprintf(parts[n].text, sizeof parts[n].text, " ctx %d/%d %d%% FULL: oldest turns drop next ", s->ctx_used,
                 s->ctx_size, pct);
    else if (s->ctx_level == 1)
        snprintf(parts[n].text, sizeof parts[n].text, " ctx %d/%d %d%% nearly full ", s->ctx_used, s->ctx_size, pct);
    else snprintf(parts[n].text, sizeof parts[n].text, " ctx %d/%d %d%%", s->ctx_used, s->ctx_size, pct);
    parts[n].style = s->ctx_level == 2 ? RAD_STYLE(RAD_ROLE_ERROR, RAD_ST_REVERSE | RAD_ST_BOLD)
                     : s->ctx_level == 1 ? RAD_STYLE(RAD_ROLE_WARN, RAD_ST_REVERSE | RAD_ST_BOLD)
                                         : bar;
    parts[n++].priority = 0;

    if (s->tps > 0) {
        snprintf(parts[n].text, sizeof parts[n].text, " \xc2\xb7 %s%.1f tok/s", s->tps_estimate ? "~" : "", s->tps);
        parts[n].style = bar;
        parts[n++].priority = 1;
    }
    if (s->ttft_ms > 0) {
        snprintf(parts[n].text, sizeof parts[n].text, " \xc2\xb7 first token %.0f ms", s->ttft_ms);
        parts[n].style = bar;
        parts[n++].priority = 3;
    }
    if (s->prompt_tokens > 0) {
        snprintf(parts[n].text, sizeof parts[n].text, " \xc2\xb7 prompt %d, %d evaluated", s->prompt_tokens,
                 s->prompt_evaluated);
        parts[n].style = bar;
        parts[n++].priority = 4;
    }
    if (s->thinking >= 0) {
        snprintf(parts[n].text, sizeof parts[n].text, " \xc2\xb7 think %s", s->thinking ? "on" : "off");
        parts[n].style = bar;
        parts[n++].priority = 5;
    }
    if (s->lines_below > 0) {
        snprintf(parts[n].text, sizeof parts[n].text, " \xc2\xb7 \xe2\x86\x93%d more (Esc)", s->lines_below);
        parts[n].style = RAD_STYLE(RAD_ROLE_WARN, RAD_ST_REVERSE);
        parts[n++].priority = 1;
    }

    char right[200];
    snprintf(right, sizeof right, " %s ", s->hint ? s->hint : s->state ? s->state : "");
    int right_w = rad_text_width(right, strlen(right));
    if (right_w > width) right_w = 0, right[0] = 0;

    /* drop parts, least important first, until the line fits */
    int keep[8], total;
    for (int i = 0; i < n; i++) keep[i] = 1;
    for (;;) {
        total = right_w;
        for (int i = 0; i < n; i++)
            if (keep[i]) total += rad_text_width(parts[i].text, strlen(parts[i].text));
        if (total <= width) break;
        int worst = -1;
        for (int i = 0; i < n; i++)
            if (keep[i] && parts[i].priority > 0 && (worst < 0 || parts[i].priority > parts[worst].priority)) worst = i;
        if (worst < 0) break;
        keep[worst] = 0;
    }
    for (int i = 0; i < n; i++)
        if (keep[i]) rad_rich_adds(r, parts[i].style, parts[i].text);
    for (int pad = width - total; pad > 0; pad--) rad_rich_adds(r, bar, " ");
    RadStyle hint_style = s->hint ? RAD_STYLE(RAD_ROLE_WARN, RAD_ST_REVERSE | RAD_ST_BOLD) : bar;
    if (right[0]) rad_rich_adds(r, hint_style, right);
}
