/*
** chat_render.c: a conversation into the exact text a model was trained on.
**
** The models' own chat templates are Jinja programs; we do not run Jinja.
** Each template we serve is reproduced by a RadChatFormat (the marker text,
** arch/common/rad_chat_formats.h) and one of the layouts below, which are the
** templates' rules written out in C: where the system text goes, what is
** trimmed, which roles must alternate, what an assistant turn's reasoning
** becomes.  tests/text/test_chat.c holds every layout to the real templates
** rendered by transformers, byte for byte, so a rule here is only as
** strange as the template it copies (Mistral moves the system text into the
** last user turn; Llama 3's first template writes the generation prompt even
** when not asked).
**
** Where a template would render something silently wrong (drop a system
** message it has no place for, or refuse with an exception), we refuse with
** RAD_E_ARG and a sentence instead; docs/CHAT.md lists those cases.
**
** Strings the templates trim are trimmed as Python's str.strip() does (what
** Jinja's trim filter calls): Unicode white space, not just ASCII.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rad_chat.h"
#include "rad_text.h"

/* ------------------------------------------------------------ the output */

/* The text being written, and (rad_chat_render_spans) which of its bytes
** are the messages' own words rather than the template's markup: every
** write made while `content` is non-zero is recorded as a span. */
typedef struct Out {
    char *p;
    size_t n, cap;
    int failed;
    int content;
    RadTextSpan *spans;
    int n_spans, cap_spans;
} Out;

static void mark(Out *o, size_t off, size_t n)
{
    if (o->failed || !n) return;
    if (o->n_spans && o->spans[o->n_spans - 1].off + o->spans[o->n_spans - 1].len == off) {
        o->spans[o->n_spans - 1].len += n;
        return;
    }
    if (o->n_spans == o->cap_spans) {
        int cap = o->cap_spans ? o->cap_spans * 2 : 16;
        RadTextSpan *grown = realloc(o->spans, (size_t)cap * sizeof *grown);
        if (!grown) {
            o->failed = 1;
            return;
        }
        o->spans = grown;
        o->cap_spans = cap;
    }
    o->spans[o->n_spans++] = (RadTextSpan){off, n};
}

static void put_n(Out *o, const char *s, size_t n)
{
    if (o->failed || !n) return;
    if (o->content) mark(o, o->n, n);
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n + 1) cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->failed = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}

static void put(Out *o, const char *s)
{
    if (s) put_n(o, s, strlen(s));
}

/* -------------------------------------------------------- text helpers */

/* Python's str.isspace() for the code point at s (len bytes left); sets *w
** to its length in bytes.  Jinja's trim and str.strip() use this set. */
static int py_space_at(const unsigned char *s, size_t len, size_t *w)
{
    unsigned c = s[0];
    *w = 1;
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
    if (c == 0xC2 && len >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return *w = 2, 1;
    if (c == 0xE1 && len >= 3 && s[1] == 0x9A && s[2] == 0x80) return *w = 3, 1; /* U+1680 */
    if (c == 0xE2 && len >= 3) {
        unsigned cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        if ((cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F)
            return *w = 3, 1;
    }
    if (c == 0xE3 && len >= 3 && s[1] == 0x80 && s[2] == 0x80) return *w = 3, 1; /* U+3000 */
    return 0;
}

/* The start of the UTF-8 character that ends at s[end-1]. */
static size_t char_start_before(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80 && end - i < 4) i--;
    return i;
}

/* The bounds [*a, *b) of s stripped of Python white space at both ends
** (Jinja's trim); *b starts as s's length. */
static void trim_bounds(const char *s, size_t *a, size_t *b)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t w;
    *a = 0;
    *b = strlen(s);
    while (*a < *b && py_space_at(u + *a, *b - *a, &w)) *a += w;
    while (*b > *a) {
        size_t c = char_start_before(s, *b);
        if (c < *a || !py_space_at(u + c, *b - c, &w) || c + w != *b) break;
        *b = c;
    }
}

/* Write s stripped of Python white space at both ends (Jinja's trim). */
static void put_trimmed(Out *o, const char *s)
{
    size_t a, b;
    trim_bounds(s, &a, &b);
    put_n(o, s + a, b - a);
}

/* The text of a message, trimmed when the format trims. */
static void put_text(Out *o, const RadChatFormat *f, const char *s)
{
    if (f->flags & RAD_CHAT_TRIM)
        put_trimmed(o, s);
    else
        put(o, s);
}

/* Write s[0..n) without leading (lead) and trailing (trail) newlines:
** Python's .lstrip('\n') / .rstrip('\n') / .strip('\n'). */
static void put_nl_stripped(Out *o, const char *s, size_t n, int lead, int trail)
{
    size_t a = 0, b = n;
    while (lead && a < b && s[a] == '\n') a++;
    while (trail && b > a && s[b - 1] == '\n') b--;
    put_n(o, s + a, b - a);
}

static const char *last_occurrence(const char *s, const char *needle)
{
    const char *hit = NULL;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) hit = p;
    return hit;
}

static int starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* ------------------------------------------------------------- the date */

/* "{date}" as the format writes it: %Y %m %d and %b (English month names,
** whatever the locale: the templates run Python's strftime in the C locale). */
static int format_date(const RadChatFormat *f, const RadChatRender *opt, char *buf, size_t cap)
{
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int y, m, d;
    if (opt->today) {
        char tail;
        if (sscanf(opt->today, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 || m < 1 || m > 12 || d < 1 || d > 31)
            return rad_error_set(RAD_E_ARG, "the date '%s' is not YYYY-MM-DD", opt->today);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm)) return rad_error_set(RAD_E_ARG, "the local date is unknown");
        y = tm.tm_year + 1900, m = tm.tm_mon + 1, d = tm.tm_mday;
    }
    size_t n = 0;
    buf[0] = 0;
    for (const char *p = f->date_format; p && *p && n + 16 < cap; p++) {
        if (*p != '%' || !p[1]) {
            buf[n++] = *p;
            continue;
        }
        switch (*++p) {
        case 'Y':
            n += (size_t)snprintf(buf + n, cap - n, "%04d", y);
            break;
        case 'm':
            n += (size_t)snprintf(buf + n, cap - n, "%02d", m);
            break;
        case 'd':
            n += (size_t)snprintf(buf + n, cap - n, "%02d", d);
            break;
        case 'b':
            n += (size_t)snprintf(buf + n, cap - n, "%s", months[m - 1]);
            break;
        default:
            buf[n++] = *p;
            break;
        }
    }
    buf[n] = 0;
    return RAD_OK;
}

/* The format's system preamble with "{date}" and "{effort}" filled in. */
static int put_preamble(Out *o, const RadChatFormat *f, const RadChatRender *opt)
{
    if (!f->system_preamble) return RAD_OK;
    char date[64] = "";
    int rc;
    if (f->date_format && (rc = format_date(f, opt, date, sizeof date))) return rc;
    const char *effort = opt->reasoning_effort ? opt->reasoning_effort
                         : opt->thinking == 0  ? "low"
                                               : "medium";
    for (const char *p = f->system_preamble; *p;) {
        if (starts_with(p, "{date}")) {
            put(o, date);
            p += 6;
        } else if (starts_with(p, "{effort}")) {
            put(o, effort);
            p += 8;
        } else {
            const char *next = strchr(p, '{');
            size_t n = next && next != p ? (size_t)(next - p) : next ? 1 : strlen(p);
            put_n(o, p, n);
            p += n;
        }
    }
    return RAD_OK;
}

/* ------------------------------------------------------------ messages */

enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_OTHER };

static int role_of(const RadChatMessage *m)
{
    if (!m->role) return ROLE_OTHER;
    if (!strcmp(m->role, "system")) return ROLE_SYSTEM;
    if (!strcmp(m->role, "user")) return ROLE_USER;
    if (!strcmp(m->role, "assistant")) return ROLE_ASSISTANT;
    return ROLE_OTHER;
}

static const char *text_of(const RadChatMessage *m)
{
    return m->content ? m->content : "";
}

static int refuse_role(const RadChatFormat *f, const RadChatMessage *m, int i)
{
    return rad_error_set(RAD_E_ARG, "the %s chat format cannot express a '%s' message (message %d)", f->name,
                         m->role ? m->role : "(null)", i + 1);
}

static int refuse_late_system(const RadChatFormat *f, int i)
{
    return rad_error_set(RAD_E_ARG, "the %s chat format takes a system message only first, not as message %d",
                         f->name, i + 1);
}

/* Templates that insist on user/assistant/user/... after an optional system
** message test exactly this: a message is a user message iff its position
** (after the system message) is even. */
static int check_alternation(const RadChatFormat *f, const RadChatMessage *m, int from, int n)
{
    if (!(f->flags & RAD_CHAT_ALTERNATE)) return RAD_OK;
    for (int i = from; i < n; i++)
        if ((role_of(&m[i]) == ROLE_USER) != ((i - from) % 2 == 0))
            return rad_error_set(
                RAD_E_ARG,
                "the %s chat format needs the messages after the system message to alternate "
                "user/assistant/user/..., and message %d is '%s'",
                f->name, i + 1, m[i].role ? m[i].role : "(null)");
    return RAD_OK;
}

static const char *role_open(const RadChatFormat *f, int role)
{
    return role == ROLE_SYSTEM ? f->system_open : role == ROLE_USER ? f->user_open : f->assistant_open;
}

static const char *role_close(const RadChatFormat *f, int role)
{
    return role == ROLE_SYSTEM ? f->system_close : role == ROLE_USER ? f->user_close : f->assistant_close;
}

static void put_turn(Out *o, const RadChatFormat *f, int role, const char *text)
{
    put(o, role_open(f, role));
    o->content++;
    put_text(o, f, text);
    o->content--;
    put(o, role_close(f, role));
}

/* A message's own words, outside put_turn. */
static void put_content(Out *o, const char *s)
{
    o->content++;
    put(o, s);
    o->content--;
}

/* src[a..b) with the spans that fall in it (a text built in pieces). */
static void put_sub(Out *o, const Out *src, size_t a, size_t b)
{
    size_t at = o->n;
    int was = o->content;
    o->content = 0;
    put_n(o, src->p + a, b - a);
    o->content = was;
    for (int i = 0; i < src->n_spans; i++) {
        size_t lo = src->spans[i].off, hi = lo + src->spans[i].len;
        if (lo < a) lo = a;
        if (hi > b) hi = b;
        if (hi > lo) mark(o, at + lo - a, hi - lo);
    }
}

/* ------------------------------------------------------------- layouts */

/* ChatML, Llama 3, Gemma: open + text + close per message.  A system turn
** comes first when the conversation opens with one, or the format has a
** default text or a preamble for it; Gemma has none and puts the system
** text at the start of the first turn after it. */
static int render_turns(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n,
                        const RadChatRender *opt)
{
    int has_system = role_of(&m[0]) == ROLE_SYSTEM, from = has_system, rc;
    for (int i = 0; i < n; i++)
        if (role_of(&m[i]) == ROLE_OTHER) return refuse_role(f, &m[i], i);
    if ((rc = check_alternation(f, m, from, n))) return rc;
    put(o, f->bos);
    if (!(f->flags & RAD_CHAT_SYSTEM_IN_USER) && (has_system || f->default_system || f->system_preamble)) {
        put(o, f->system_open);
        if ((rc = put_preamble(o, f, opt))) return rc;
        if (has_system) {
            o->content++;
            put_text(o, f, text_of(&m[0]));
            o->content--;
        } else
            put(o, f->default_system);
        put(o, f->system_close);
    }
    for (int i = from; i < n; i++) {
        int role = role_of(&m[i]);
        if ((f->flags & RAD_CHAT_SYSTEM_IN_USER) && has_system && i == from) {
            put(o, role_open(f, role));
            put_content(o, text_of(&m[0])); /* untrimmed: the template trims only the turn's own text */
            put(o, "\n\n");
            o->content++;
            put_text(o, f, text_of(&m[i]));
            o->content--;
            put(o, role_close(f, role));
        } else {
            put_turn(o, f, role, text_of(&m[i]));
        }
    }
    if (opt->add_generation_prompt || (f->flags & RAD_CHAT_ALWAYS_PROMPT)) put(o, f->generation_prompt);
    return RAD_OK;
}

/* Qwen3: ChatML, where an assistant turn after the last real user message
** (one that is not only a <tool_response>) shows its reasoning in a think
** block, and earlier turns drop it.  Reasoning left inside the content
** (no separate reasoning given) is split off at </think>, as the template
** does. */
static int render_qwen3(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n,
                        const RadChatRender *opt)
{
    for (int i = 0; i < n; i++)
        if (role_of(&m[i]) == ROLE_OTHER) return refuse_role(f, &m[i], i);
    if (role_of(&m[0]) == ROLE_SYSTEM) put_turn(o, f, ROLE_SYSTEM, text_of(&m[0]));
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--) {
        const char *t = text_of(&m[i]);
        if (role_of(&m[i]) == ROLE_USER &&
            !(starts_with(t, "<tool_response>") && ends_with(t, "</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    const char *open = f->reasoning_open, *close = f->reasoning_close;
    for (int i = 0; i < n; i++) {
        int role = role_of(&m[i]);
        if (role == ROLE_SYSTEM && i == 0) continue;
        if (role != ROLE_ASSISTANT) {
            put_turn(o, f, role, text_of(&m[i]));
            continue;
        }
        const char *content = text_of(&m[i]);
        size_t content_len = strlen(content);
        const char *reasoning = m[i].reasoning ? m[i].reasoning : "";
        size_t reasoning_len = strlen(reasoning);
        const char *first_close;
        if (!m[i].reasoning && (first_close = strstr(content, close))) {
            /* content.split('</think>')[-1].lstrip('\n') and
            ** content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
            const char *after = last_occurrence(content, close) + strlen(close);
            size_t before_len = (size_t)(first_close - content);
            while (before_len && content[before_len - 1] == '\n') before_len--;
            const char *r = content;
            for (const char *p = content; (p = strstr(p, open)) && p + strlen(open) <= content + before_len;
                 p++)
                r = p + strlen(open);
            reasoning_len = before_len - (size_t)(r - content);
            while (reasoning_len && *r == '\n') r++, reasoning_len--;
            reasoning = r;
            while (*after == '\n') after++;
            content = after;
            content_len = strlen(after);
        }
        put(o, f->assistant_open);
        if (i > last_query && (i == n - 1 || reasoning_len)) {
            put(o, open);
            put(o, "\n");
            o->content++;
            put_nl_stripped(o, reasoning, reasoning_len, 1, 1);
            o->content--;
            put(o, "\n");
            put(o, close);
            put(o, "\n\n");
            o->content++;
            put_nl_stripped(o, content, content_len, 1, 0);
            o->content--;
        } else {
            o->content++;
            put_n(o, content, content_len);
            o->content--;
        }
        put(o, f->assistant_close);
    }
    if (opt->add_generation_prompt) {
        put(o, f->generation_prompt);
        if (opt->thinking == 0) put(o, f->no_think);
    }
    return RAD_OK;
}

/* Llama 2: <s>[INST] user [/INST] assistant </s> per exchange, each text
** stripped; the system text in <<SYS>> at the start of the first turn. */
static int render_llama2(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n,
                         const RadChatRender *opt)
{
    int has_system = role_of(&m[0]) == ROLE_SYSTEM, from = has_system, rc;
    (void)opt; /* the template has no generation prompt: [/INST] is it */
    if ((rc = check_alternation(f, m, from, n))) return rc;
    for (int i = from; i < n; i++) {
        int role = role_of(&m[i]);
        if (role == ROLE_SYSTEM) return refuse_late_system(f, i);
        if (role == ROLE_OTHER) return refuse_role(f, &m[i], i);
        Out text = {0};
        if (i == from && has_system) {
            put(&text, f->system_open);
            put_content(&text, text_of(&m[0]));
            put(&text, f->system_close);
        }
        put_content(&text, text_of(&m[i]));
        if (text.failed) {
            free(text.p);
            free(text.spans);
            return rad_error_set(RAD_E_NOMEM, "out of memory");
        }
        size_t a = 0, b = text.n;
        if (f->flags & RAD_CHAT_TRIM) trim_bounds(text.p ? text.p : "", &a, &b);
        put(o, role_open(f, role));
        if (text.p) put_sub(o, &text, a, b);
        put(o, role_close(f, role));
        free(text.p);
        free(text.spans);
    }
    return RAD_OK;
}

/* Mistral: [INST] user[/INST] assistant</s>; the system text goes into the
** user turn that ends the conversation, and nowhere when an assistant turn
** ends it (so the template does). */
static int render_mistral(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n,
                          const RadChatRender *opt)
{
    int has_system = role_of(&m[0]) == ROLE_SYSTEM, from = has_system, rc;
    (void)opt; /* no generation prompt: [/INST] is it */
    if ((rc = check_alternation(f, m, from, n))) return rc;
    for (int i = from; i < n; i++) {
        int role = role_of(&m[i]);
        if (role == ROLE_SYSTEM) return refuse_late_system(f, i);
        if (role == ROLE_OTHER) return refuse_role(f, &m[i], i);
    }
    put(o, f->bos);
    for (int i = from; i < n; i++) {
        if (role_of(&m[i]) == ROLE_USER) {
            put(o, f->user_open);
            if (has_system && i == n - 1) {
                put(o, f->system_open);
                put_content(o, text_of(&m[0]));
                put(o, f->system_close);
            }
            put_content(o, text_of(&m[i]));
            put(o, f->user_close);
        } else {
            put_turn(o, f, ROLE_ASSISTANT, text_of(&m[i]));
        }
    }
    return RAD_OK;
}

/* gpt-oss: a system message (identity, dates, reasoning effort, channels),
** the conversation's system text as the developer's instructions, then
** user and final-channel assistant messages.  Reasoning is dropped from
** history except on a closing assistant turn rendered without a generation
** prompt, which also ends in <|return|>: the template's training layout. */
static int render_harmony(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n,
                          const RadChatRender *opt)
{
    static const char *const channel_tags[] = {"<|channel|>analysis<|message|>",
                                               "<|channel|>final<|message|>"};
    int has_system = role_of(&m[0]) == ROLE_SYSTEM, from = has_system, rc;
    for (int i = from; i < n; i++) {
        int role = role_of(&m[i]);
        if (role == ROLE_SYSTEM) return refuse_late_system(f, i);
        if (role == ROLE_OTHER) return refuse_role(f, &m[i], i);
        for (int k = 0; k < 2 && role == ROLE_ASSISTANT; k++)
            if (strstr(text_of(&m[i]), channel_tags[k]) ||
                (m[i].reasoning && strstr(m[i].reasoning, channel_tags[k])))
                return rad_error_set(RAD_E_ARG, "message %d holds gpt-oss channel markup (%s)", i + 1,
                                     channel_tags[k]);
    }
    put(o, f->system_open);
    if ((rc = put_preamble(o, f, opt))) return rc;
    put(o, f->system_close);
    if (has_system && *text_of(&m[0])) {
        put(o, "<|start|>developer<|message|># Instructions\n\n");
        put_content(o, text_of(&m[0]));
        put(o, "\n\n");
        put(o, f->system_close);
    }
    for (int i = from; i < n; i++) {
        if (role_of(&m[i]) == ROLE_USER) {
            put_turn(o, f, ROLE_USER, text_of(&m[i]));
        } else if (i == n - 1 && !opt->add_generation_prompt) {
            if (m[i].reasoning) {
                put(o, f->generation_prompt);
                put(o, f->reasoning_open);
                put_content(o, m[i].reasoning);
                put(o, f->reasoning_close);
            }
            put(o, f->assistant_open);
            put_content(o, text_of(&m[i]));
            put(o, "<|return|>");
        } else {
            put_turn(o, f, ROLE_ASSISTANT, text_of(&m[i]));
        }
    }
    if (opt->add_generation_prompt) put(o, f->generation_prompt);
    return RAD_OK;
}

/* DeepSeek: BOS, the system text (every system message joined by blank
** lines; R1: the last one only), then <｜User｜>text and
** <｜Assistant｜>text<｜end▁of▁sentence｜>.  R1 keeps only what follows the
** last </think> of an earlier reply. */
static int render_deepseek(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n,
                           const RadChatRender *opt)
{
    for (int i = 0; i < n; i++)
        if (role_of(&m[i]) == ROLE_OTHER) return refuse_role(f, &m[i], i);
    put(o, f->bos);
    int last = -1, seen = 0;
    for (int i = 0; i < n; i++)
        if (role_of(&m[i]) == ROLE_SYSTEM) last = i;
    for (int i = 0; i < n; i++) {
        if (role_of(&m[i]) != ROLE_SYSTEM || ((f->flags & RAD_CHAT_LAST_SYSTEM) && i != last)) continue;
        if (seen++) put(o, "\n\n");
        put_content(o, text_of(&m[i]));
    }
    for (int i = 0; i < n; i++) {
        int role = role_of(&m[i]);
        if (role == ROLE_USER) {
            put_turn(o, f, ROLE_USER, text_of(&m[i]));
        } else if (role == ROLE_ASSISTANT) {
            const char *text = text_of(&m[i]), *cut;
            if (f->reasoning_close && (cut = last_occurrence(text, f->reasoning_close)))
                text = cut + strlen(f->reasoning_close);
            put_turn(o, f, ROLE_ASSISTANT, text);
        }
    }
    if (opt->add_generation_prompt) put(o, f->generation_prompt);
    return RAD_OK;
}

/* GLM-4.5: [gMASK]<sop>, then <|system|>\ntext, <|user|>\ntext and
** <|assistant|> turns with no closing marker.  Every assistant turn writes
** "\n<think>REASONING</think>" when it follows the last user message and
** has reasoning (stripped), else "\n<think></think>", then "\n" and its
** text stripped, if any.  Reasoning left inside the content (none given) is
** split off at </think> as Qwen3's template does.  Thinking off: each user
** turn ends in "/nothink" (unless it already does) and the generation
** prompt in an empty think block.  Roles other than the three are
** refused (the template would drop them silently). */
static int render_glm(Out *o, const RadChatFormat *f, const RadChatMessage *m, int n, const RadChatRender *opt)
{
    int last_user = -1;
    for (int i = 0; i < n; i++) {
        if (role_of(&m[i]) == ROLE_OTHER) return refuse_role(f, &m[i], i);
        if (role_of(&m[i]) == ROLE_USER) last_user = i;
    }
    const char *open = f->reasoning_open, *close = f->reasoning_close;
    put(o, f->bos);
    for (int i = 0; i < n; i++) {
        int role = role_of(&m[i]);
        const char *content = text_of(&m[i]);
        if (role == ROLE_SYSTEM) {
            put_turn(o, f, role, content);
            continue;
        }
        if (role == ROLE_USER) {
            put_turn(o, f, role, content);
            if (opt->thinking == 0 && !ends_with(content, "/nothink")) put(o, "/nothink");
            continue;
        }
        const char *reasoning = m[i].reasoning ? m[i].reasoning : "";
        size_t reasoning_len = strlen(reasoning);
        const char *first_close;
        if (!m[i].reasoning && (first_close = strstr(content, close))) {
            /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n'),
            ** content.split('</think>')[-1].lstrip('\n') */
            size_t before_len = (size_t)(first_close - content);
            while (before_len && content[before_len - 1] == '\n') before_len--;
            const char *r = content;
            for (const char *p = content; (p = strstr(p, open)) && p + strlen(open) <= content + before_len; p++)
                r = p + strlen(open);
            reasoning_len = before_len - (size_t)(r - content);
            while (reasoning_len && *r == '\n') r++, reasoning_len--;
            reasoning = r;
            content = last_occurrence(content, close) + strlen(close);
            while (*content == '\n') content++;
        }
        put(o, f->assistant_open);
        put(o, "\n");
        put(o, open);
        if (i > last_user && reasoning_len) {
            /* reasoning_content.strip(): the piece may not end in a NUL */
            char *r = strndup(reasoning, reasoning_len);
            if (!r) return rad_error_set(RAD_E_NOMEM, "out of memory");
            o->content++;
            put_trimmed(o, r);
            o->content--;
            free(r);
        }
        put(o, close);
        size_t a, b;
        trim_bounds(content, &a, &b);
        if (b > a) {
            put(o, "\n");
            o->content++;
            put_n(o, content + a, b - a);
            o->content--;
        }
    }
    if (opt->add_generation_prompt) {
        put(o, f->generation_prompt);
        if (opt->thinking == 0) put(o, f->no_think);
    }
    return RAD_OK;
}

int rad_chat_render(const RadChatFormat *f, const RadChatMessage *messages, int n, const RadChatRender *opt,
                    char **out)
{
    return rad_chat_render_spans(f, messages, n, opt, out, NULL, NULL);
}

int rad_chat_render_spans(const RadChatFormat *f, const RadChatMessage *messages, int n, const RadChatRender *opt,
                          char **out, struct RadTextSpan **spans, int *n_spans)
{
    static const RadChatRender defaults = {1, -1, NULL, NULL};
    *out = NULL;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!f) return rad_error_set(RAD_E_ARG, "no chat format");
    if (f->choices)
        return rad_error_set(RAD_E_ARG,
                             "the chat format '%s' chooses among formats; resolve it against the "
                             "model's vocabulary first (rad_chat_format_resolve)",
                             f->name ? f->name : "?");
    if (n < 1 || !messages) return rad_error_set(RAD_E_ARG, "a conversation needs at least one message");
    if (!opt) opt = &defaults;
    Out o = {0};
    int rc;
    switch (f->style) {
    case RAD_CHAT_STYLE_TURNS:
        rc = render_turns(&o, f, messages, n, opt);
        break;
    case RAD_CHAT_STYLE_QWEN3:
        rc = render_qwen3(&o, f, messages, n, opt);
        break;
    case RAD_CHAT_STYLE_LLAMA2:
        rc = render_llama2(&o, f, messages, n, opt);
        break;
    case RAD_CHAT_STYLE_MISTRAL:
        rc = render_mistral(&o, f, messages, n, opt);
        break;
    case RAD_CHAT_STYLE_HARMONY:
        rc = render_harmony(&o, f, messages, n, opt);
        break;
    case RAD_CHAT_STYLE_DEEPSEEK:
        rc = render_deepseek(&o, f, messages, n, opt);
        break;
    case RAD_CHAT_STYLE_GLM:
        rc = render_glm(&o, f, messages, n, opt);
        break;
    default:
        rc = rad_error_set(RAD_E_UNSUPPORTED, "chat format '%s' has an unknown layout %d", f->name, f->style);
    }
    if (!rc && o.failed) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    if (!rc && !o.p && !(o.p = calloc(1, 1))) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    if (rc) {
        free(o.p);
        free(o.spans);
        return rc;
    }
    *out = o.p;
    if (spans && n_spans) {
        *spans = o.spans;
        *n_spans = o.n_spans;
    } else {
        free(o.spans);
    }
    return RAD_OK;
}
