/*
** model_spec.c: turning MODEL into something precise (an alias, a
** repository at a revision, a local path) and choosing the files of a
** repository listing that the model needs.  See model_spec.h.
**
** Every name a spec yields is checked here, before anything uses it to
** build a URL, a cache path or a store file name: the repository with
** rad_hf_repo_id_ok, the revision with rad_hf_revision_ok, the quant and the
** alias with a small character set.  A spec that fails a check is refused
** with the part named, never repaired.
*/
#include "model_spec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ parsing */

int rad_model_quant_ok(const char *q)
{
    size_t n = q ? strlen(q) : 0;
    if (n == 0 || n > 31) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)q[i]) && q[i] != '_') return 0;
    return 1;
}

/* Alias names: what ollama-style names use, and nothing that makes a path. */
static int alias_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 100 || s[0] == '.' || s[0] == '-') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_' && ch != ':') return 0;
    }
    return !strstr(s, "..");
}

static int copy_part(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap) return 0;
    memcpy(dst, src, n);
    dst[n] = 0;
    return 1;
}

/* "ORG/REPO[@REV][:QUANT]" after the "hf:". */
static int parse_hub(const char *text, const char *rest, RadModelSpec *s)
{
    size_t repo_len = strcspn(rest, "@:");
    if (!copy_part(s->repo, sizeof s->repo, rest, repo_len) || !rad_hf_repo_id_ok(s->repo))
        return rad_error_set(
            RAD_E_ARG, "%s: '%.*s' is not a repository id: use ORG/NAME with letters, digits, '.', '-', '_'",
            text, (int)repo_len, rest);
    const char *p = rest + repo_len;
    strcpy(s->revision, "main");
    if (*p == '@') {
        size_t n = strcspn(p + 1, ":");
        if (!copy_part(s->revision, sizeof s->revision, p + 1, n) || !rad_hf_revision_ok(s->revision))
            return rad_error_set(RAD_E_ARG, "%s: '%.*s' is not a branch, tag or commit", text, (int)n, p + 1);
        p += 1 + n;
    }
    if (*p == ':') {
        /* A quant, or a GGUF file of the repository ("sub/name.gguf"). */
        const char *q = p + 1;
        size_t n = strlen(q);
        if (n > 5 && strcasecmp(q + n - 5, ".gguf") == 0) {
            if (!rad_hf_relpath_ok(q) || !copy_part(s->file, sizeof s->file, q, n))
                return rad_error_set(RAD_E_ARG, "%s: '%s' is not a file name of the repository", text, q);
        } else {
            if (!copy_part(s->quant, sizeof s->quant, q, n) || !rad_model_quant_ok(s->quant))
                return rad_error_set(RAD_E_ARG,
                                     "%s: '%s' is not a quantization (e.g. q4_k_m, q8_0, bf16) or a .gguf file",
                                     text, q);
        }
        s->quant_from_spec = 1;
    }
    s->kind = RAD_SPEC_HUB;
    int at = strcmp(s->revision, "main") != 0;
    snprintf(s->name, sizeof s->name, "hf:%s%s%s", s->repo, at ? "@" : "", at ? s->revision : "");
    return RAD_OK;
}

/* Look `name` up in one alias file.  1 when found (s filled), 0 when not,
** negative on a malformed line that matches. */
static int alias_lookup(const char *file, const char *name, RadModelSpec *s)
{
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    char line[2048];
    int lineno = 0, found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        char *p = line;
        while (*p == ' ') p++;
        if (!*p || *p == '#') continue;
        /* Columns are separated by tabs (several, to align them); the
        ** fifth, the licence note, runs to the end of the line. */
        char *cols[5] = {0}, *tok = p;
        int n = 0;
        while (n < 5) {
            cols[n++] = tok;
            char *tab = n < 5 ? strchr(tok, '\t') : NULL;
            if (!tab) break;
            *tab = 0;
            tok = tab + 1;
            while (*tok == '\t') tok++;
        }
        if (strcmp(cols[0], name) != 0) continue;
        found = 1;
        if (n < 4 || !rad_hf_repo_id_ok(cols[1]) || !rad_hf_revision_ok(cols[2])) {
            fclose(f);
            return rad_error_set(RAD_E_FORMAT,
                                 "%s:%d: alias '%s' needs name, ORG/REPO, revision, quant or file", file,
                                 lineno, name);
        }
        snprintf(s->repo, sizeof s->repo, "%s", cols[1]);
        snprintf(s->revision, sizeof s->revision, "%s", cols[2]);
        size_t q = strlen(cols[3]);
        if (q > 5 && strcmp(cols[3] + q - 5, ".gguf") == 0) {
            if (!rad_hf_relpath_ok(cols[3]) || q >= sizeof s->file) {
                fclose(f);
                return rad_error_set(RAD_E_FORMAT, "%s:%d: '%s' is not a file name", file, lineno, cols[3]);
            }
            snprintf(s->file, sizeof s->file, "%s", cols[3]);
        } else if (strcmp(cols[3], "-") != 0) {
            if (!rad_model_quant_ok(cols[3])) {
                fclose(f);
                return rad_error_set(RAD_E_FORMAT, "%s:%d: '%s' is not a quantization", file, lineno,
                                     cols[3]);
            }
            snprintf(s->quant, sizeof s->quant, "%s", cols[3]);
        }
        snprintf(s->licence, sizeof s->licence, "%s", n > 4 ? cols[4] : "");
    }
    fclose(f);
    return found;
}

/* An absolute spelling of `text` that keeps its last component as written:
** the folders are resolved (realpath), a symlink at the end is not, so a
** snapshot link keeps the name that finds a split model's other parts. */
static int absolute_path(const char *text, char *out, size_t cap)
{
    char dir[RAD_SPEC_PATH_MAX];
    const char *slash = strrchr(text, '/');
    const char *base = slash ? slash + 1 : text;
    if (slash == text)
        snprintf(dir, sizeof dir, "/");
    else if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - text), text);
    else
        snprintf(dir, sizeof dir, ".");
    char real[PATH_MAX];
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return realpath(text, out) ? 0 : -1;
    if (!realpath(dir, real)) return -1;
    int n = snprintf(out, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* A local path: a folder, or a model file known by its first bytes (a GGUF
** may have any name: a Hugging Face blob, an ollama blob, a copy).  Only
** regular files and folders are models: a FIFO or a device named x.gguf is
** refused before anything opens it (an open would block or read forever). */
static int parse_path(const char *text, RadModelSpec *s)
{
    struct stat st;
    if (stat(text, &st) != 0) return rad_error_set(RAD_E_NOTFOUND, "%s: %s", text, strerror(errno));
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        return rad_error_set(RAD_E_FORMAT, "%s: not a regular file (a model is a .rad, a GGUF or a folder)", text);
    /* A folder is named by where it really is (its name in the store stays
    ** put); a file keeps its own name (see absolute_path). */
    int bad = S_ISDIR(st.st_mode) ? !realpath(text, s->path) : absolute_path(text, s->path, sizeof s->path) != 0;
    if (bad) return rad_error_set(RAD_E_NOTFOUND, "%s: %s", text, strerror(errno ? errno : ENAMETOOLONG));
    snprintf(s->name, sizeof s->name, "%s", s->path);
    if (S_ISDIR(st.st_mode)) {
        s->kind = RAD_SPEC_HF_DIR;
        return RAD_OK;
    }
    char magic[4] = {0};
    int fd = open(s->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, magic, 4) != 4) memset(magic, 0, 4);
        close(fd);
    }
    size_t n = strlen(s->path);
    int gguf = memcmp(magic, "GGUF", 4) == 0 || (n > 5 && strcmp(s->path + n - 5, ".gguf") == 0 &&
                                                 memcmp(magic, "RADM", 4) != 0);
    s->kind = gguf ? RAD_SPEC_GGUF : RAD_SPEC_RAD;
    return RAD_OK;
}

/* "hf.co/", "huggingface.co/" (ollama's spelling), with or without https://:
** the length of the prefix, else 0. */
static size_t hub_prefix(const char *text)
{
    static const char *const prefixes[] = {"https://hf.co/", "https://huggingface.co/", "hf.co/",
                                           "huggingface.co/"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncasecmp(text, prefixes[i], strlen(prefixes[i])) == 0) return strlen(prefixes[i]);
    return 0;
}

/* A missing path spelled like a repository id ("Qwen/Qwen3-0.6B[:Q]")
** gets the spelling that means the hub. */
static int missing_path(const char *text, RadModelSpec *s)
{
    int rc = parse_path(text, s);
    if (rc != RAD_E_NOTFOUND || text[0] == '.' || text[0] == '/' || text[0] == '~') return rc;
    char repo[200];
    size_t n = strcspn(text, "@:");
    if (!copy_part(repo, sizeof repo, text, n) || !strchr(repo, '/') || !rad_hf_repo_id_ok(repo)) return rc;
    return rad_error_set(RAD_E_NOTFOUND,
                         "%s: no such file or folder; for the Hugging Face repository write hf:%s "
                         "(or hf.co/%s)",
                         text, text, text);
}

int rad_model_spec_parse_in(const char *text, const char *const *alias_files, int n_files, RadModelSpec *s)
{
    memset(s, 0, sizeof *s);
    if (!text || !*text) return rad_error_set(RAD_E_ARG, "no model given");
    if (strlen(text) >= RAD_SPEC_PATH_MAX) return rad_error_set(RAD_E_ARG, "model name too long");
    if (strncmp(text, "hf:", 3) == 0) return parse_hub(text, text + 3, s);
    size_t pre = hub_prefix(text);
    if (pre) return parse_hub(text, text + pre, s);

    size_t n = strlen(text);
    int looks_like_path = strchr(text, '/') || (n > 4 && strcmp(text + n - 4, ".rad") == 0) ||
                          (n > 5 && strcmp(text + n - 5, ".gguf") == 0);
    if (looks_like_path) return missing_path(text, s);

    /* An alias as written, else ALIAS:QUANT. */
    char name[128], quant[64] = "";
    if (!copy_part(name, sizeof name, text, n) || !alias_ok(name)) {
        if (access(text, F_OK) == 0) return parse_path(text, s);
        return rad_error_set(RAD_E_ARG, "%s: not a model name (letters, digits, '.', '-', '_', ':')", text);
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            char *colon = strrchr(name, ':');
            if (!colon || colon == name) break;
            snprintf(quant, sizeof quant, "%s", colon + 1);
            *colon = 0;
            if (!rad_model_quant_ok(quant)) break;
        }
        for (int i = 0; i < n_files; i++) {
            RadModelSpec t;
            memset(&t, 0, sizeof t);
            int found = alias_lookup(alias_files[i], name, &t);
            if (found < 0) return found;
            if (!found) continue;
            *s = t;
            s->kind = RAD_SPEC_HUB;
            snprintf(s->name, sizeof s->name, "%s", name);
            if (quant[0]) {
                snprintf(s->quant, sizeof s->quant, "%s", quant);
                s->quant_from_spec = 1;
                s->file[0] = 0; /* the quant overrides the alias's file */
            }
            return RAD_OK;
        }
    }
    if (access(text, F_OK) == 0) return parse_path(text, s);
    return rad_error_set(RAD_E_NOTFOUND,
                         "unknown model '%s': not an alias in %s, not hf:ORG/REPO, not an existing file; "
                         "see radiance(1), MODEL SPECS",
                         text, n_files ? alias_files[n_files - 1] : "models.tsv");
}

int rad_model_alias_files(char **files, int max)
{
    int n = 0;
    const char *v = getenv("RADIANCE_ALIASES");
    if (v && *v && n < max) files[n++] = strdup(v);
    /* The XDG base directory specification: a relative path is invalid and
    ** is ignored. */
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char *s = NULL;
    if (xdg && xdg[0] == '/') {
        if (asprintf(&s, "%s/radiance/models.tsv", xdg) < 0) s = NULL;
    } else if (home && *home) {
        if (asprintf(&s, "%s/.config/radiance/models.tsv", home) < 0) s = NULL;
    }
    if (s && n < max)
        files[n++] = s;
    else
        free(s);
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        /* installed: PREFIX/bin/radiance -> PREFIX/share/radiance/models.tsv;
        ** source tree: build/radiance -> share/models.tsv */
        static const char *const rel[] = {"%s/../share/radiance/models.tsv", "%s/../share/models.tsv"};
        for (int i = 0; i < 2 && n < max; i++) {
            char *p = NULL;
            if (asprintf(&p, rel[i], exe) < 0) continue;
            if (access(p, R_OK) == 0 || i == 1)
                files[n++] = p;
            else
                free(p);
        }
    }
    for (int i = 0; i < n; i++)
        if (!files[i]) { /* an asprintf/strdup that failed */
            for (int j = i + 1; j < n; j++) files[j - 1] = files[j];
            n--, i--;
        }
    return n;
}

int rad_model_spec_parse(const char *text, RadModelSpec *out)
{
    char *files[6];
    int n = rad_model_alias_files(files, 6);
    int rc = rad_model_spec_parse_in(text, (const char *const *)files, n, out);
    for (int i = 0; i < n; i++) free(files[i]);
    return rc;
}

/* ------------------------------------------------------------- choosing */

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int sel_add(RadSelection *s, int i, int *cap)
{
    for (int k = 0; k < s->n; k++)
        if (s->idx[k] == i) return RAD_OK;
    if (s->n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        int *grown = realloc(s->idx, (size_t)*cap * sizeof *grown);
        if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
        s->idx = grown;
    }
    s->idx[s->n++] = i;
    return RAD_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "NAME-00002-of-00005.gguf": 1 with the prefix length, the part and the count. */
static int split_part(const char *path, size_t *prefix, int *part, int *count)
{
    size_t n = strlen(path);
    if (n < 5 + 15 || !has_suffix(path, ".gguf")) return 0;
    const char *t = path + n - 5 - 15; /* "-00002-of-00005" */
    if (t[0] != '-' || strncmp(t + 6, "-of-", 4) != 0) return 0;
    for (int i = 0; i < 5; i++)
        if (!isdigit((unsigned char)t[1 + i]) || !isdigit((unsigned char)t[10 + i])) return 0;
    *part = atoi(t + 1);
    *count = atoi(t + 10);
    *prefix = (size_t)(t - path);
    return *part >= 1 && *count >= 1 && *part <= *count;
}

/* 1 when `quant` appears in name as a whole token, ignoring case. */
static int names_quant(const char *name, const char *quant)
{
    size_t m = strlen(quant);
    for (const char *p = name; *p; p++) {
        if (strncasecmp(p, quant, m) != 0) continue;
        int before_ok = p == name || !isalnum((unsigned char)p[-1]);
        int after_ok = !isalnum((unsigned char)p[m]) && p[m] != '_';
        if (before_ok && after_ok) return 1;
    }
    return 0;
}

static int depth_of(const char *path)
{
    int d = 0;
    for (; *path; path++) d += *path == '/';
    return d;
}

static int select_safetensors(const RadHfTree *t, const char *what, RadSelection *s)
{
    static const char *const side[] = {
        "config.json",       "generation_config.json",  "tokenizer.json",     "tokenizer_config.json",
        "tokenizer.model",   "special_tokens_map.json", "vocab.json",         "merges.txt",
        "added_tokens.json", "chat_template.jinja",     "chat_template.json",
    };
    int cap = 0, rc = RAD_OK;
    int has_index = rad_hf_tree_find(t, "model.safetensors.index.json") != NULL;
    for (int i = 0; i < t->n && !rc; i++) {
        const char *p = t->files[i].path;
        if (strchr(p, '/')) continue;
        int take = 0;
        for (size_t k = 0; k < sizeof side / sizeof *side; k++) take |= strcmp(p, side[k]) == 0;
        if (has_index)
            take |= strcmp(p, "model.safetensors.index.json") == 0 ||
                    (has_suffix(p, ".safetensors") && strncmp(p, "consolidated", 12) != 0 &&
                     strcmp(p, "model.safetensors") != 0);
        else
            take |= strcmp(p, "model.safetensors") == 0;
        if (take) rc = sel_add(s, i, &cap);
    }
    if (rc) return rc;
    int weights = 0;
    for (int k = 0; k < s->n; k++) weights += has_suffix(t->files[s->idx[k]].path, ".safetensors");
    if (!weights)
        return rad_error_set(RAD_E_NOTFOUND,
                             "%s: has config.json but neither model.safetensors nor the shards of "
                             "model.safetensors.index.json at the top level",
                             what);
    s->kind = RAD_REPO_SAFETENSORS;
    return RAD_OK;
}

/* A GGUF file that is a model: not a vision projector, not an importance
** matrix (llama.cpp's own filter). */
static int gguf_is_model(const char *path)
{
    const char *b = base_name(path);
    return has_suffix(path, ".gguf") && !strcasestr(b, "mmproj") && !strcasestr(b, "imatrix");
}

/* A file that stands for its model: one not split, or a split set's part 1. */
static int gguf_leader(const char *path)
{
    size_t prefix;
    int part, count;
    return gguf_is_model(path) && (!split_part(path, &prefix, &part, &count) || part == 1);
}

void rad_model_gguf_tag(const char *path, char *out, size_t cap)
{
    const char *b = base_name(path);
    size_t n = strlen(b) - 5, prefix;
    int part, count;
    if (split_part(path, &prefix, &part, &count)) n = (size_t)(path + prefix - b);
    size_t start = n;
    while (start > 0 && b[start - 1] != '-' && b[start - 1] != '.') start--;
    size_t k = 0;
    for (size_t i = start; i < n && k + 1 < cap; i++) out[k++] = (char)toupper((unsigned char)b[i]);
    out[k] = 0;
}

/* The distinct quants of the repository's models, sorted, comma-separated. */
static void gguf_tags(const RadHfTree *t, char *out, size_t cap)
{
    char tags[64][32];
    int n = 0;
    for (int i = 0; i < t->n && n < 64; i++) {
        if (!gguf_leader(t->files[i].path)) continue;
        char tag[32];
        rad_model_gguf_tag(t->files[i].path, tag, sizeof tag);
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = !strcmp(tags[k], tag);
        if (!seen && tag[0]) snprintf(tags[n++], sizeof tags[0], "%s", tag);
    }
    qsort(tags, (size_t)n, sizeof tags[0], (int (*)(const void *, const void *))strcmp);
    size_t used = 0;
    out[0] = 0;
    for (int k = 0; k < n; k++) {
        int w = snprintf(out + used, cap - used, "%s%s", k ? ", " : "", tags[k]);
        if (w < 0 || (size_t)w >= cap - used) break;
        used += (size_t)w;
    }
}

/* The repository part of `what` ("ORG/NAME@commit"), for the remedies. */
static void repo_of(const char *what, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s", (int)strcspn(what, "@"), what);
}

/* The model files whose name holds `quant` as a whole token, at the least
** depth where any does: how many, the first in *best, the names in list.
** Several at that depth are several models: the caller refuses. */
static int gguf_matches(const RadHfTree *t, const char *quant, int *best, char *list, size_t cap)
{
    int n = 0, depth = -1;
    size_t used = 0;
    list[0] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < t->n; i++) {
            const char *p = t->files[i].path;
            if (!gguf_leader(p) || !names_quant(base_name(p), quant)) continue;
            if (pass == 0) {
                if (depth < 0 || depth_of(p) < depth) depth = depth_of(p);
                continue;
            }
            if (depth_of(p) != depth) continue;
            if (n++ == 0) *best = i;
            int w = snprintf(list + used, cap - used, "%s%s", n > 1 ? ", " : "", p);
            if (w > 0 && (size_t)w < cap - used) used += (size_t)w;
        }
    return n;
}

/* Which GGUF file `quant` or `file` names (docs/HUB.md, "Choosing files"):
**   - a file: that path exactly;
**   - a quant: the model files holding it as a whole token of their name,
**     any case ("Q4_K" is not "Q4_K_M", "Q4_XS" not "IQ4_XS"), the
**     shallowest first; two at the same depth are ambiguous and refused;
**   - neither: Q4_K_M, else Q8_0 (llama.cpp's order), else the only model.
** mmproj and imatrix files are never models; a split set is named by its
** part 1 and brings every part. */
static int select_gguf(const RadHfTree *t, const char *quant, const char *file, const char *what,
                       RadSelection *s)
{
    char repo[200], tags[600], list[1200];
    repo_of(what, repo, sizeof repo);
    int best = -1;
    if (file && *file) {
        for (int i = 0; i < t->n && best < 0; i++)
            if (strcmp(t->files[i].path, file) == 0) best = i;
        if (best < 0 || !gguf_leader(file)) {
            gguf_tags(t, tags, sizeof tags);
            return rad_error_set(RAD_E_NOTFOUND, "%s: no model file '%s' (a split model is named by its part 1); "
                                 "the quants here: %s", what, file, tags[0] ? tags : "none");
        }
    } else {
        const char *const defaults[] = {RAD_DEFAULT_GGUF_QUANT, "Q8_0"};
        const char *const *tries = quant && *quant ? &quant : defaults;
        int n_tries = quant && *quant ? 1 : 2, n = 0;
        for (int k = 0; k < n_tries && n == 0; k++) {
            n = gguf_matches(t, tries[k], &best, list, sizeof list);
            if (n > 1)
                return rad_error_set(RAD_E_NOTFOUND, "%s: %s matches several files: %s; name one, as in hf:%s:%.*s",
                                     what, tries[k], list, repo, (int)strcspn(list, ","), list);
        }
        if (n == 0 && !(quant && *quant)) {
            int models = 0;
            for (int i = 0; i < t->n; i++)
                if (gguf_leader(t->files[i].path) && models++ == 0) best = i;
            if (models != 1) best = -1;
            if (models > 1) {
                gguf_tags(t, tags, sizeof tags);
                return rad_error_set(RAD_E_NOTFOUND, "%s: several GGUF models and none is %s or Q8_0; the quants "
                                     "here: %s (write hf:%s:QUANT)", what, RAD_DEFAULT_GGUF_QUANT, tags, repo);
            }
        }
        if (best < 0) {
            gguf_tags(t, tags, sizeof tags);
            return rad_error_set(RAD_E_NOTFOUND, "%s: no GGUF file for %s; the quants here: %s (write hf:%s:QUANT)",
                                 what, quant && *quant ? quant : RAD_DEFAULT_GGUF_QUANT, tags[0] ? tags : "none",
                                 repo);
        }
    }
    int cap = 0, rc = sel_add(s, best, &cap);
    size_t prefix;
    int part, count;
    if (!rc && split_part(t->files[best].path, &prefix, &part, &count)) {
        int found = 1;
        for (int i = 0; i < t->n && !rc; i++) {
            size_t pf;
            int pt, ct;
            const char *p = t->files[i].path;
            if (i == best || !split_part(p, &pf, &pt, &ct) || pf != prefix || ct != count ||
                strncmp(p, t->files[best].path, prefix) != 0)
                continue;
            rc = sel_add(s, i, &cap);
            found++;
        }
        if (!rc && found != count)
            rc = rad_error_set(RAD_E_NOTFOUND, "%s: %s is split in %d parts but %d are listed", what,
                               t->files[best].path, count, found);
    }
    if (rc) return rc;
    qsort(s->idx, (size_t)s->n, sizeof *s->idx, cmp_int);
    s->kind = RAD_REPO_GGUF;
    s->first = best;
    rad_model_gguf_tag(t->files[best].path, s->quant, sizeof s->quant);
    if (!s->quant[0]) snprintf(s->quant, sizeof s->quant, "%s", "GGUF");
    return RAD_OK;
}

int rad_model_select(const RadHfTree *t, const char *quant, const char *file, const char *what,
                     RadSelection *out)
{
    memset(out, 0, sizeof *out);
    out->first = -1;
    int has_config = rad_hf_tree_find(t, "config.json") != NULL, top_st = 0, gguf = 0;
    for (int i = 0; i < t->n; i++) {
        const char *p = t->files[i].path;
        top_st |= !strchr(p, '/') && has_suffix(p, ".safetensors");
        gguf |= has_suffix(p, ".gguf");
    }
    int rc;
    if (has_config && top_st && !(file && *file))
        rc = select_safetensors(t, what, out);
    else if (gguf)
        rc = select_gguf(t, quant, file, what, out);
    else if (has_config)
        rc = rad_error_set(RAD_E_NOTFOUND, "%s: has config.json but no safetensors weights at the top level",
                           what);
    else
        rc = rad_error_set(RAD_E_UNSUPPORTED,
                           "%s: holds neither config.json with safetensors weights nor GGUF files", what);
    if (rc) rad_selection_free(out);
    return rc;
}

void rad_selection_free(RadSelection *s)
{
    if (!s) return;
    free(s->idx);
    s->idx = NULL;
    s->n = 0;
}
