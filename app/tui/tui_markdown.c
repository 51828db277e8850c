/*
** tui_markdown.c: a reply's markdown as styled terminal lines.
**
** Replies stream in, and a renderer that re-parses the whole reply as one
** document makes text already on screen jump: a paragraph re-wraps when an
** emphasis closes, a list renumbers, a setext underline turns the line above
** into a heading.  So the rules here are line-local:
**
**   - Block structure (heading, list item, quote, rule, fence, table row,
**     paragraph line) is decided from the start of each source line and the
**     fence state of the lines before it, never from lines after it.
**   - Inline markup (emphasis, code spans, links, strikethrough) is parsed by
**     md4c on that one line's content; a soft line break is kept as a line
**     break (model output is usually already laid out in lines).
**   - Markers are replaced by glyphs of the same width (- by a bullet, > by a
**     bar), so a line's layout is final once it ends.  The one change to a
**     shown line is colour: a fenced code block is highlighted once its
**     closing fence has arrived.
**   - Blank lines are collapsed and only drawn when the next block starts,
**     so a trailing blank never flickers at the bottom.
** Code blocks are numbered ([1], [2], ...) over the transcript; /copy N
** copies one (rad_md_code_block finds it with the same fence rules).
*/
#include "tui.h"

#include <ctype.h>
#include <md4c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ fences */

typedef struct Fence {
    char ch;                    /* '`' or '~' */
    int len;                    /* 3 or more */
    int indent;                 /* columns before it (code lines lose up to this much) */
    char lang[32];
} Fence;

static size_t count_spaces(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    return i;
}

static size_t trim_end(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    return n;
}

/* Is line [s, s+n) an opening fence?  Any indentation is accepted: models
** put fences inside list items at whatever depth. */
static int fence_open(const char *s, size_t n, Fence *f)
{
    size_t i = count_spaces(s, n);
    if (i >= n || (s[i] != '`' && s[i] != '~')) return 0;
    char ch = s[i];
    size_t j = i;
    while (j < n && s[j] == ch) j++;
    if (j - i < 3) return 0;
    size_t k = j + count_spaces(s + j, n - j), end = trim_end(s, n);
    if (ch == '`' && memchr(s + k, '`', end > k ? end - k : 0)) return 0;  /* ``` inline ``` is a code span */
    f->ch = ch;
    f->len = (int)(j - i);
    f->indent = (int)i;
    size_t l = 0;
    while (k < end && !isspace((unsigned char)s[k]) && s[k] != '{' && l + 1 < sizeof f->lang) f->lang[l++] = s[k++];
    f->lang[l] = 0;
    return 1;
}

static int fence_close(const char *s, size_t n, const Fence *f)
{
    size_t i = count_spaces(s, n), end = trim_end(s, n), j = i;
    while (j < end && s[j] == f->ch) j++;
    return j > i && j == end && (int)(j - i) >= f->len;
}

/* A code line without the fence's indentation. */
static void code_line_strip(const char **s, size_t *n, const Fence *f)
{
    int k = 0;
    while (k < f->indent && *n > 0 && (*s)[0] == ' ') {
        (*s)++;
        (*n)--;
        k++;
    }
}

/* Lines of a text one at a time: the line (without its '\n') and whether
** it ended (a newline follows it). */
typedef struct LineIter {
    const char *text;
    size_t n, pos;
} LineIter;

static int next_line(LineIter *it, const char **ls, size_t *ll, int *ended)
{
    if (it->pos >= it->n) return 0;
    const char *start = it->text + it->pos;
    const char *nl = memchr(start, '\n', it->n - it->pos);
    *ls = start;
    *ll = nl ? (size_t)(nl - start) : it->n - it->pos;
    *ended = nl != NULL;
    it->pos += *ll + (nl ? 1 : 0);
    return 1;
}

int rad_md_code_block(const char *text, size_t n, int k, char **out, char **lang)
{
    int index = -1, in_block = 0;
    Fence f = {0};
    RadBuf code = {0};
    LineIter it = {text, n, 0};
    const char *ls;
    size_t ll;
    int ended;
    while (next_line(&it, &ls, &ll, &ended)) {
        if (!in_block) {
            if (fence_open(ls, ll, &f)) {
                in_block = 1;
                index++;
            }
        } else if (fence_close(ls, ll, &f)) {
            in_block = 0;
            if (index == k) break;
        } else if (index == k) {
            code_line_strip(&ls, &ll, &f);
            rad_buf_add(&code, ls, ll);
            rad_buf_add(&code, "\n", 1);
        }
    }
    if (index < k) {
        rad_buf_free(&code);
        return -1;
    }
    *out = code.s ? code.s : strdup("");
    if (lang) *lang = strdup(f.lang);
    return 0;
}

/* ------------------------------------------------------------ highlighting */

static const char *const kw_c[] = {"auto", "bool", "break", "case", "char", "class", "const", "constexpr",
    "continue", "default", "delete", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto",
    "if", "inline", "int", "long", "namespace", "new", "nullptr", "private", "protected", "public", "register",
    "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "true", "typedef",
    "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while", "NULL", "size_t",
    "#include", "#define", "#if", "#ifdef", "#ifndef", "#endif", "#else", NULL};
static const char *const kw_java[] = {"abstract", "boolean", "break", "byte", "case", "catch", "char", "class",
    "const", "continue", "default", "do", "double", "else", "enum", "extends", "false", "final", "finally",
    "float", "for", "fun", "if", "implements", "import", "int", "interface", "long", "new", "null", "override",
    "package", "private", "protected", "public", "return", "short", "static", "super", "switch", "this",
    "throw", "throws", "true", "try", "val", "var", "void", "while", "using", "namespace", "string", NULL};
static const char *const kw_js[] = {"async", "await", "break", "case", "catch", "class", "const", "continue",
    "default", "delete", "do", "else", "export", "extends", "false", "finally", "for", "from", "function", "if",
    "import", "in", "instanceof", "interface", "let", "new", "null", "of", "return", "static", "switch", "this",
    "throw", "true", "try", "type", "typeof", "undefined", "var", "void", "while", "yield", NULL};
static const char *const kw_py[] = {"False", "None", "True", "and", "as", "assert", "async", "await", "break",
    "class", "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
    "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "self", "try", "while",
    "with", "yield", NULL};
static const char *const kw_rust[] = {"as", "async", "await", "break", "const", "continue", "crate", "dyn",
    "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
    "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "Some", "None", "Ok", "Err", NULL};
static const char *const kw_go[] = {"break", "case", "chan", "const", "continue", "default", "defer", "else",
    "fallthrough", "false", "for", "func", "go", "goto", "if", "import", "interface", "map", "nil", "package",
    "range", "return", "select", "struct", "switch", "true", "type", "var", NULL};
static const char *const kw_sh[] = {"case", "do", "done", "elif", "else", "esac", "export", "fi", "for",
    "function", "if", "in", "local", "return", "then", "until", "while", "echo", "cd", "set", NULL};
static const char *const kw_sql[] = {"select", "from", "where", "insert", "into", "values", "update", "set",
    "delete", "create", "table", "index", "drop", "alter", "join", "left", "right", "inner", "outer", "on",
    "and", "or", "not", "null", "as", "order", "by", "group", "having", "limit", "primary", "key", "integer",
    "text", "SELECT", "FROM", "WHERE", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE", "CREATE",
    "TABLE", "INDEX", "DROP", "ALTER", "JOIN", "LEFT", "ON", "AND", "OR", "NOT", "NULL", "AS", "ORDER", "BY",
    "GROUP", "LIMIT", "PRIMARY", "KEY", "INTEGER", "TEXT", NULL};
static const char *const kw_lua[] = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
    "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL};
static const char *const kw_none[] = {NULL};

typedef struct Lang {
    const char *names;          /* aliases, space-separated, with a space at each end */
    const char *const *keywords;
    const char *line_comment;   /* or NULL */
    int block_comments;         /* C's slash-star */
    int triple_quotes;          /* Python's """ strings */
    int backticks;              /* ` starts a string */
} Lang;

static const Lang langs[] = {
    {" c h cpp c++ cc cxx hpp objc objective-c cuda glsl ", kw_c, "//", 1, 0, 0},
    {" java kotlin kt scala cs csharp c# swift dart ", kw_java, "//", 1, 0, 0},
    {" js javascript ts typescript jsx tsx mjs json jsonc ", kw_js, "//", 1, 0, 1},
    {" python py python3 ", kw_py, "#", 0, 1, 0},
    {" rust rs ", kw_rust, "//", 1, 0, 0},
    {" go golang ", kw_go, "//", 1, 0, 1},
    {" sh bash shell zsh console fish ", kw_sh, "#", 0, 0, 1},
    {" sql sqlite postgres mysql ", kw_sql, "--", 1, 0, 0},
    {" lua ", kw_lua, "--", 0, 0, 0},
    {" yaml yml toml ini conf cfg dockerfile make makefile cmake ruby rb perl r ", kw_none, "#", 0, 0, 0},
};

static const Lang *lang_find(const char *name)
{
    char key[40];
    if (!name[0]) return NULL;
    snprintf(key, sizeof key, " %s ", name);
    for (char *p = key; *p; p++) *p = (char)tolower((unsigned char)*p);
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
        if (strstr(langs[i].names, key)) return &langs[i];
    return NULL;
}

static int is_keyword(const Lang *l, const char *s, size_t n)
{
    for (const char *const *k = l->keywords; *k; k++)
        if (strlen(*k) == n && !memcmp(*k, s, n)) return 1;
    return 0;
}

#define ST(role) RAD_STYLE(role, 0)

/* One code line into r, coloured.  *state carries what spans lines: 1
** inside a block comment, 2 inside a triple-quoted string. */
static void highlight(RadRich *r, const char *s, size_t n, const Lang *l, int *state)
{
    size_t i = 0;
    RadStyle code = ST(RAD_ROLE_CODE);
    while (i < n) {
        if (*state == 1 || *state == 2) {
            const char *close = *state == 1 ? "*/" : "\"\"\"";
            size_t cl = strlen(close), j = i;
            while (j + cl <= n && memcmp(s + j, close, cl)) j++;
            int closed = j + cl <= n;
            size_t end = closed ? j + cl : n;
            rad_rich_add(r, ST(*state == 1 ? RAD_ROLE_COMMENT : RAD_ROLE_STRING), s + i, end - i);
            if (closed) *state = 0;
            i = end;
            continue;
        }
        char c = s[i];
        if (l && l->line_comment && !strncmp(s + i, l->line_comment, strlen(l->line_comment)) &&
            !(c == '#' && l->keywords == kw_c)) {
            rad_rich_add(r, ST(RAD_ROLE_COMMENT), s + i, n - i);
            return;
        }
        if (l && l->block_comments && i + 1 < n && c == '/' && s[i + 1] == '*') {
            *state = 1;
            rad_rich_add(r, ST(RAD_ROLE_COMMENT), s + i, 2);
            i += 2;
            continue;
        }
        if (l && l->triple_quotes && i + 2 < n && !memcmp(s + i, "\"\"\"", 3)) {
            *state = 2;
            rad_rich_add(r, ST(RAD_ROLE_STRING), s + i, 3);
            i += 3;
            continue;
        }
        if (c == '"' || c == '\'' || (c == '`' && l && l->backticks)) {
            size_t j = i + 1;
            while (j < n && s[j] != c) j += (s[j] == '\\' && j + 1 < n) ? 2 : 1;
            if (j < n) j++;
            rad_rich_add(r, ST(RAD_ROLE_STRING), s + i, j - i);
            i = j;
            continue;
        }
        if (isdigit((unsigned char)c) && (i == 0 || !(isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_'))) {
            size_t j = i;
            while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '.' || s[j] == '_')) j++;
            rad_rich_add(r, ST(RAD_ROLE_NUMBER), s + i, j - i);
            i = j;
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_' || (c == '#' && l && l->keywords == kw_c)) {
            size_t j = i + 1;
            while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '_')) j++;
            int kw = l && is_keyword(l, s + i, j - i);
            rad_rich_add(r, kw ? RAD_STYLE(RAD_ROLE_KEYWORD, RAD_ST_BOLD) : code, s + i, j - i);
            i = j;
            continue;
        }
        size_t j = i + 1;
        while (j < n && !isalnum((unsigned char)s[j]) && !strchr("_\"'`/#-", s[j])) j++;
        rad_rich_add(r, code, s + i, j - i);
        i = j;
    }
}

/* ------------------------------------------------------------ inline markup */

typedef struct Inline {
    RadRich *r;
    RadStyle base;
    int strong, em, del, code, link, underline;
    const char *href;
    size_t href_len, link_start;
} Inline;

static RadStyle inline_style(const Inline *in)
{
    RadStyle st = in->base;
    int attrs = RAD_STYLE_ATTRS(st), role = RAD_STYLE_ROLE(st);
    if (in->strong) attrs |= RAD_ST_BOLD;
    if (in->em) attrs |= RAD_ST_ITALIC;
    if (in->del) attrs |= RAD_ST_STRIKE;
    if (in->underline) attrs |= RAD_ST_UNDERLINE;
    if (in->code) role = RAD_ROLE_CODE;
    if (in->link) {
        role = RAD_ROLE_LINK;
        attrs |= RAD_ST_UNDERLINE;
    }
    return RAD_STYLE(role, attrs);
}

static int md_block(MD_BLOCKTYPE type, void *detail, void *user)
{
    (void)type, (void)detail, (void)user;
    return 0;
}

static int md_enter_span(MD_SPANTYPE type, void *detail, void *user)
{
    Inline *in = user;
    switch (type) {
    case MD_SPAN_STRONG: in->strong++; break;
    case MD_SPAN_EM: in->em++; break;
    case MD_SPAN_DEL: in->del++; break;
    case MD_SPAN_U: in->underline++; break;
    case MD_SPAN_CODE: in->code++; break;
    case MD_SPAN_A:
        in->link++;
        in->href = ((MD_SPAN_A_DETAIL *)detail)->href.text;
        in->href_len = ((MD_SPAN_A_DETAIL *)detail)->href.size;
        in->link_start = in->r->len;
        break;
    case MD_SPAN_IMG: rad_rich_adds(in->r, inline_style(in), "[image: "); break;
    default: break;
    }
    return 0;
}

static int md_leave_span(MD_SPANTYPE type, void *detail, void *user)
{
    Inline *in = user;
    (void)detail;
    switch (type) {
    case MD_SPAN_STRONG: in->strong--; break;
    case MD_SPAN_EM: in->em--; break;
    case MD_SPAN_DEL: in->del--; break;
    case MD_SPAN_U: in->underline--; break;
    case MD_SPAN_CODE: in->code--; break;
    case MD_SPAN_A: {
        in->link--;
        size_t shown = in->r->len - in->link_start;
        /* the target, when the text does not already say it */
        if (in->href && in->href_len &&
            !(shown == in->href_len && !memcmp(in->r->text + in->link_start, in->href, shown))) {
            RadStyle dim = RAD_STYLE(RAD_STYLE_ROLE(in->base), RAD_STYLE_ATTRS(in->base) | RAD_ST_DIM);
            rad_rich_adds(in->r, dim, " <");
            rad_rich_add(in->r, dim, in->href, in->href_len);
            rad_rich_adds(in->r, dim, ">");
        }
        in->href = NULL;
        break;
    }
    case MD_SPAN_IMG: rad_rich_adds(in->r, inline_style(in), "]"); break;
    default: break;
    }
    return 0;
}

/* An HTML entity as its character (the common ones and numeric forms). */
static void add_entity(Inline *in, const char *s, size_t n)
{
    static const struct { const char *name, *text; } named[] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&nbsp;", " "},
        {"&copy;", "\xc2\xa9"}, {"&mdash;", "\xe2\x80\x94"}, {"&ndash;", "\xe2\x80\x93"},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strlen(named[i].name) == n && !memcmp(named[i].name, s, n)) {
            rad_rich_adds(in->r, inline_style(in), named[i].text);
            return;
        }
    if (n > 3 && s[1] == '#') {
        long cp = (s[2] == 'x' || s[2] == 'X') ? strtol(s + 3, NULL, 16) : strtol(s + 2, NULL, 10);
        char buf[4];
        int len = 0;
        if (cp > 0 && cp < 0x80) buf[len++] = (char)cp;
        else if (cp > 0 && cp < 0x800) {
            buf[len++] = (char)(0xc0 | (cp >> 6));
            buf[len++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp > 0 && cp < 0x10000 && !(cp >= 0xd800 && cp < 0xe000)) {
            buf[len++] = (char)(0xe0 | (cp >> 12));
            buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            buf[len++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp >= 0x10000 && cp < 0x110000) {
            buf[len++] = (char)(0xf0 | (cp >> 18));
            buf[len++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            buf[len++] = (char)(0x80 | (cp & 0x3f));
        }
        if (len) {
            rad_rich_add(in->r, inline_style(in), buf, (size_t)len);
            return;
        }
    }
    rad_rich_add(in->r, inline_style(in), s, n);
}

static int md_text(MD_TEXTTYPE type, const MD_CHAR *text, MD_SIZE size, void *user)
{
    Inline *in = user;
    switch (type) {
    case MD_TEXT_NULLCHAR: rad_rich_adds(in->r, inline_style(in), "\xef\xbf\xbd"); break;
    case MD_TEXT_BR:
    case MD_TEXT_SOFTBR: rad_rich_adds(in->r, inline_style(in), " "); break;
    case MD_TEXT_ENTITY: add_entity(in, text, size); break;
    default: rad_rich_add(in->r, inline_style(in), text, size); break;
    }
    return 0;
}

/* Would md4c read this line content as a block of its own (a nested marker
** the line classifier left in)?  Then it needs a backslash to stay text.
** Returns where the backslash goes, or -1. */
static long block_marker_at(const char *s, size_t n)
{
    if (n == 0) return -1;
    if (s[0] == '#' || s[0] == '>') return 0;
    if (strchr("-+*", s[0]) && (n == 1 || s[1] == ' ' || s[1] == '\t')) return 0;
    if (strchr("=-", s[0])) {
        size_t i = 0;
        while (i < n && s[i] == s[0]) i++;
        if (i == n) return 0;
    }
    size_t i = 0;
    while (i < n && i < 10 && isdigit((unsigned char)s[i])) i++;
    if (i > 0 && i < n && (s[i] == '.' || s[i] == ')') && (i + 1 == n || s[i + 1] == ' ')) return (long)i;
    if (n >= 3 && (!memcmp(s, "```", 3) || !memcmp(s, "~~~", 3))) return 0;
    return -1;
}

/* The inline markup of one line's content, styled from base, into r. */
static void render_inline(RadRich *r, const char *s, size_t n, RadStyle base)
{
    size_t lead = count_spaces(s, n);
    s += lead;
    n = trim_end(s, n - lead);
    if (n == 0) return;
    /* md4c 0.4.8 reads a few bytes past the end of its input (its permissive
     * autolink scan), so the copy ends in zeros that it may read safely. */
    enum { PAD = 16 };
    char stack[512], *buf = n + 1 + PAD <= sizeof stack ? stack : malloc(n + 1 + PAD);
    if (!buf) {
        rad_rich_add(r, base, s, n);
        return;
    }
    long at = block_marker_at(s, n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if ((long)i == at) buf[m++] = '\\';
        buf[m++] = s[i];
    }
    memset(buf + m, 0, PAD);
    Inline in = {r, base};
    MD_PARSER parser = {0};
    parser.abi_version = 0;
    parser.flags = MD_FLAG_STRIKETHROUGH | MD_FLAG_NOHTML | MD_FLAG_NOINDENTEDCODEBLOCKS |
                   MD_FLAG_PERMISSIVEURLAUTOLINKS | MD_FLAG_PERMISSIVEWWWAUTOLINKS;
    parser.enter_block = md_block;
    parser.leave_block = md_block;
    parser.enter_span = md_enter_span;
    parser.leave_span = md_leave_span;
    parser.text = md_text;
    size_t before = r->len;
    if (md_parse(buf, (MD_SIZE)m, &parser, &in) != 0) {
        /* md4c gave up (out of memory): show the source */
        r->len = before;
        rad_rich_add(r, base, s, n);
    }
    if (buf != stack) free(buf);
}

/* ------------------------------------------------------------ blocks */

typedef struct Md {
    RadLines *out;
    const RadMdOptions *o;
    RadRich prefix, cont, body;
    int started;                /* some line was drawn (leading blanks are dropped) */
    int blank;                  /* a blank line waits for the next block */
    int in_fence;
    Fence fence;
    int fence_no;               /* the open block's number */
    int fence_highlight;        /* its closing fence exists: colour it */
    const Lang *fence_lang;
    int fence_state;            /* highlighter state across its lines */
    int n_code;
} Md;

/* Start a line's prefix and continuation with the option's indent. */
static void lead_begin(Md *m)
{
    rad_rich_clear(&m->prefix);
    rad_rich_clear(&m->cont);
    rad_rich_clear(&m->body);
    if (m->o->indent) {
        rad_rich_adds(&m->prefix, m->o->base, m->o->indent);
        rad_rich_adds(&m->cont, m->o->base, m->o->indent);
    }
}

static void spaces(RadRich *r, RadStyle st, size_t n)
{
    static const char blanks[] = "                                ";
    while (n > 0) {
        size_t k = n < sizeof blanks - 1 ? n : sizeof blanks - 1;
        rad_rich_add(r, st, blanks, k);
        n -= k;
    }
}

static void flush_blank(Md *m)
{
    if (m->blank && m->started) {
        lead_begin(m);
        rad_wrap(m->out, &m->prefix, &m->cont, &m->body, m->o->width, RAD_WRAP_WORD);
    }
    m->blank = 0;
    m->started = 1;
}

static int is_rule(const char *s, size_t n)
{
    size_t i = count_spaces(s, n), count = 0;
    if (i >= n || !strchr("-*_", s[i])) return 0;
    char c = s[i];
    for (; i < n; i++) {
        if (s[i] == c) count++;
        else if (s[i] != ' ' && s[i] != '\t') return 0;
    }
    return count >= 3;
}

/* A list marker at s: bullet (returns 1, *marker_len 1) or ordered (2,
** digits and the '.' or ')'), followed by a space; else 0. */
static int list_marker(const char *s, size_t n, size_t *marker_len)
{
    if (n >= 2 && strchr("-*+", s[0]) && (s[1] == ' ' || s[1] == '\t')) {
        *marker_len = 1;
        return 1;
    }
    if (n == 1 && strchr("-*+", s[0])) {
        *marker_len = 1;
        return 1;
    }
    size_t i = 0;
    while (i < n && i < 9 && isdigit((unsigned char)s[i])) i++;
    if (i > 0 && i < n && (s[i] == '.' || s[i] == ')') && (i + 1 == n || s[i + 1] == ' ' || s[i + 1] == '\t')) {
        *marker_len = i + 1;
        return 2;
    }
    return 0;
}

/* One source line outside a fence. */
static void render_text_line(Md *m, const char *s, size_t n)
{
    const RadStyle base = m->o->base, mark = RAD_STYLE(RAD_ROLE_MARK, 0);
    size_t end = trim_end(s, n);
    if (count_spaces(s, end) == end) {
        m->blank = 1;
        return;
    }
    flush_blank(m);
    lead_begin(m);
    size_t indent = count_spaces(s, n);
    size_t max_indent = (size_t)(m->o->width > 8 ? m->o->width / 3 : 0);
    size_t shown_indent = indent < max_indent ? indent : max_indent;
    RadStyle text_style = base;

    /* quotes: every '>' becomes a bar */
    size_t i = indent;
    int quoted = 0;
    while (i < n && s[i] == '>') {
        quoted = 1;
        i++;
        if (i < n && s[i] == ' ') i++;
        i += count_spaces(s + i, n - i);
    }
    if (quoted) {
        spaces(&m->prefix, base, shown_indent);
        spaces(&m->cont, base, shown_indent);
        for (size_t k = indent; k < i; k++)
            if (s[k] == '>') {
                rad_rich_adds(&m->prefix, RAD_STYLE(RAD_ROLE_QUOTE, 0), "\xe2\x94\x82 ");
                rad_rich_adds(&m->cont, RAD_STYLE(RAD_ROLE_QUOTE, 0), "\xe2\x94\x82 ");
            }
        text_style = RAD_STYLE(RAD_ROLE_QUOTE, RAD_ST_ITALIC);
        s += i;
        n -= i;
        indent = shown_indent = 0;
    }

    const char *c = s + indent;
    size_t cn = n - indent, mlen = 0;
    if (!quoted) {
        spaces(&m->prefix, base, shown_indent);
        spaces(&m->cont, base, shown_indent);
    }
    if (is_rule(c, cn)) {
        int w = m->o->width - (int)shown_indent - (m->o->indent ? (int)strlen(m->o->indent) : 0);
        int len = w < 40 ? (w > 3 ? w : 3) : 40;
        for (int k = 0; k < len; k++) rad_rich_adds(&m->body, mark, "\xe2\x94\x80");
        rad_wrap(m->out, &m->prefix, &m->cont, &m->body, m->o->width, RAD_WRAP_CHAR);
        return;
    }
    if (cn > 0 && c[0] == '#') {
        size_t h = 0;
        while (h < cn && c[h] == '#') h++;
        if (h <= 6 && (h == cn || c[h] == ' ' || c[h] == '\t')) {
            rad_rich_add(&m->prefix, RAD_STYLE(RAD_ROLE_HEADING, RAD_ST_DIM), c, h);
            rad_rich_adds(&m->prefix, base, " ");
            spaces(&m->cont, base, h + 1);
            /* a closing run of #s is decoration */
            size_t e = trim_end(c, cn);
            size_t k = e;
            while (k > h && c[k - 1] == '#') k--;
            if (k < e && k > h && (c[k - 1] == ' ' || c[k - 1] == '\t')) e = k;
            render_inline(&m->body, c + h, e - h, RAD_STYLE(RAD_ROLE_HEADING, RAD_ST_BOLD));
            rad_wrap(m->out, &m->prefix, &m->cont, &m->body, m->o->width, RAD_WRAP_WORD);
            return;
        }
    }
    int kind = list_marker(c, cn, &mlen);
    if (kind == 1) {
        const char *bullet = indent >= 2 ? "\xe2\x97\xa6" : "\xe2\x80\xa2";     /* ◦ nested, • top */
        rad_rich_adds(&m->prefix, mark, bullet);
        rad_rich_adds(&m->prefix, base, " ");
        spaces(&m->cont, base, 2);
        render_inline(&m->body, c + mlen, cn - mlen, text_style);
    } else if (kind == 2) {
        rad_rich_add(&m->prefix, mark, c, mlen);
        rad_rich_adds(&m->prefix, base, " ");
        spaces(&m->cont, base, mlen + 1);
        render_inline(&m->body, c + mlen, cn - mlen, text_style);
    } else if (cn > 0 && c[0] == '|') {
        /* a table row, kept as written; the separator row dimmed */
        int sep = 1;
        for (size_t k = 0; k < trim_end(c, cn); k++)
            if (!strchr("|-: \t", c[k])) sep = 0;
        if (sep) rad_rich_add(&m->body, mark, c, trim_end(c, cn));
        else render_inline(&m->body, c, cn, text_style);
    } else {
        render_inline(&m->body, c, cn, text_style);
    }
    rad_wrap(m->out, &m->prefix, &m->cont, &m->body, m->o->width, RAD_WRAP_WORD);
}

static void fence_border(Md *m, const char *glyph, int number)
{
    lead_begin(m);
    spaces(&m->prefix, m->o->base, (size_t)(m->fence.indent < m->o->width / 3 ? m->fence.indent : 0));
    rad_rich_adds(&m->body, RAD_STYLE(RAD_ROLE_MARK, 0), glyph);
    if (number > 0) {
        char label[48];
        snprintf(label, sizeof label, " [%d]", number);
        rad_rich_adds(&m->body, RAD_STYLE(RAD_ROLE_MARK, RAD_ST_BOLD), label);
        if (m->fence.lang[0]) {
            rad_rich_adds(&m->body, RAD_STYLE(RAD_ROLE_MARK, 0), " ");
            rad_rich_adds(&m->body, RAD_STYLE(RAD_ROLE_MARK, 0), m->fence.lang);
        }
    }
    rad_wrap(m->out, &m->prefix, &m->cont, &m->body, m->o->width, RAD_WRAP_CHAR);
}

static void render_code_line(Md *m, const char *s, size_t n)
{
    code_line_strip(&s, &n, &m->fence);
    lead_begin(m);
    size_t ind = (size_t)(m->fence.indent < m->o->width / 3 ? m->fence.indent : 0);
    spaces(&m->prefix, m->o->base, ind);
    spaces(&m->cont, m->o->base, ind);
    rad_rich_adds(&m->prefix, RAD_STYLE(RAD_ROLE_MARK, 0), "\xe2\x94\x82 ");
    rad_rich_adds(&m->cont, RAD_STYLE(RAD_ROLE_MARK, 0), "\xe2\x94\x82 ");
    n = trim_end(s, n);
    if (m->fence_highlight) highlight(&m->body, s, n, m->fence_lang, &m->fence_state);
    else rad_rich_add(&m->body, RAD_STYLE(RAD_ROLE_CODE, 0), s, n);
    rad_wrap(m->out, &m->prefix, &m->cont, &m->body, m->o->width, RAD_WRAP_CHAR);
}

/* Does a closing fence for f follow at rest? */
static int fence_closes_later(const char *rest, size_t n, const Fence *f, int final)
{
    LineIter it = {rest, n, 0};
    const char *ls;
    size_t ll;
    int ended;
    while (next_line(&it, &ls, &ll, &ended))
        if ((ended || final) && fence_close(ls, ll, f)) return 1;
    return 0;
}

static void render_raw(RadLines *out, const char *text, size_t n, const RadMdOptions *o)
{
    RadRich prefix = {0}, cont = {0}, body = {0};
    LineIter it = {text, n, 0};
    const char *ls;
    size_t ll;
    int ended;
    while (next_line(&it, &ls, &ll, &ended)) {
        rad_rich_clear(&prefix);
        rad_rich_clear(&cont);
        rad_rich_clear(&body);
        if (o->indent) {
            rad_rich_adds(&prefix, o->base, o->indent);
            rad_rich_adds(&cont, o->base, o->indent);
        }
        rad_rich_add(&body, o->base, ls, ll);
        size_t lead = count_spaces(ls, ll);
        spaces(&cont, o->base, lead < (size_t)o->width / 3 ? lead : 0);
        rad_wrap(out, &prefix, &cont, &body, o->width, RAD_WRAP_WORD);
    }
    rad_rich_free(&prefix);
    rad_rich_free(&cont);
    rad_rich_free(&body);
}

int rad_md_render(RadLines *out, const char *text, size_t n, const RadMdOptions *o)
{
    if (o->raw) {
        render_raw(out, text, n, o);
        int count = 0, in = 0;
        Fence f;
        LineIter it = {text, n, 0};
        const char *ls;
        size_t ll;
        int ended;
        while (next_line(&it, &ls, &ll, &ended)) {
            if (!in && fence_open(ls, ll, &f)) {
                in = 1;
                count++;
            } else if (in && fence_close(ls, ll, &f)) {
                in = 0;
            }
        }
        return count;
    }
    Md m = {0};
    m.out = out;
    m.o = o;
    LineIter it = {text, n, 0};
    const char *ls;
    size_t ll;
    int ended;
    while (next_line(&it, &ls, &ll, &ended)) {
        if (m.in_fence) {
            if ((ended || o->final) && fence_close(ls, ll, &m.fence)) {
                m.in_fence = 0;
                fence_border(&m, "\xe2\x94\x94", 0);        /* └ */
            } else {
                render_code_line(&m, ls, ll);
            }
        } else if (fence_open(ls, ll, &m.fence)) {
            flush_blank(&m);
            m.in_fence = 1;
            m.fence_no = o->code_base + m.n_code++;
            m.fence_lang = lang_find(m.fence.lang);
            m.fence_state = 0;
            m.fence_highlight = ended && fence_closes_later(text + it.pos, n - it.pos, &m.fence, o->final);
            if (o->final) m.fence_highlight = 1;
            fence_border(&m, "\xe2\x94\x8c", m.fence_no);  /* ┌ [N] lang */
        } else {
            render_text_line(&m, ls, ll);
        }
    }
    rad_rich_free(&m.prefix);
    rad_rich_free(&m.cont);
    rad_rich_free(&m.body);
    return m.n_code;
}
