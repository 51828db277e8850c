/*
** term_safe.c: the one rule for which characters of file- or model-derived
** text may reach a terminal, and the visible escape that stands for each
** one that may not.  Every printer uses it: rad_safe_text (cli.c) for the
** commands' output, and the full-screen chat's wrapper (tui/tui_text.c),
** so `show`, `run` on a terminal, `chat --plain`, the chat and `sessions
** show` all show the same hostile byte the same way.  Its own file because
** the TUI layout test compiles the layout code alone, without the rest of
** the command-line helpers.
*/
#include "cli.h"

#include <stdio.h>
#include <utf8proc.h>

/* Does code point cp need a visible escape? */
static int unsafe_cp(int32_t cp, int flags)
{
    if (cp == '\n' || cp == '\t') return !(flags & RAD_SAFE_TEXT);
    if (cp < 0x20 || cp == 0x7f) return 1;
    if (cp >= 0x80 && cp <= 0x9f) return 1;                 /* C1: CSI, OSC, ... as code points */
    if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) return 1;   /* bidi */
    return 0;
}

int rad_safe_escape(const char *s, size_t n, int flags, size_t *used, char esc[RAD_SAFE_ESC_MAX])
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t got = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &cp);
    if (got <= 0) {
        *used = 1;
        return snprintf(esc, RAD_SAFE_ESC_MAX, "\\x%02x", (unsigned char)s[0]);
    }
    *used = (size_t)got;
    if (!unsafe_cp(cp, flags)) return 0;
    if (cp == '\n') return snprintf(esc, RAD_SAFE_ESC_MAX, "\\n");
    if (cp == '\t') return snprintf(esc, RAD_SAFE_ESC_MAX, "\\t");
    if (cp == '\r') return snprintf(esc, RAD_SAFE_ESC_MAX, "\\r");
    if (cp < 0x80) return snprintf(esc, RAD_SAFE_ESC_MAX, "\\x%02x", (unsigned)cp);
    return snprintf(esc, RAD_SAFE_ESC_MAX, "\\u%04x", (unsigned)cp);
}
