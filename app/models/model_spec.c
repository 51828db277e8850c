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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        if (!copy_part(s->quant, sizeof s->quant, p + 1, strlen(p + 1)) || !rad_model_quant_ok(s->quant))
            return rad_error_set(RAD_E_ARG, "%s: '%s' is not a quantization (e.g. bf16, q8_0, Q4_K_M)", text,
                                 p + 1);
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

/* A local path: .rad, .gguf (by name or magic) or a folder. */
static int parse_path(const char *text, RadModelSpec *s)
{
    struct stat st;
    if (stat(text, &st) != 0) return rad_error_set(RAD_E_NOTFOUND, "%s: %s", text, strerror(errno));
    if (!realpath(text, s->path)) return rad_error_set(RAD_E_NOTFOUND, "%s: %s", text, strerror(errno));
    snprintf(s->name, sizeof s->name, "%s", s->path);
    if (S_ISDIR(st.st_mode)) {
        s->kind = RAD_SPEC_HF_DIR;
        return RAD_OK;
    }
    size_t n = strlen(s->path);
    char magic[4] = {0};
    FILE *f = fopen(s->path, "rb");
    if (f) {
        if (fread(magic, 1, 4, f) != 4) memset(magic, 0, 4);
        fclose(f);
    }
    int gguf = (n > 5 && strcmp(s->path + n - 5, ".gguf") == 0) || memcmp(magic, "GGUF", 4) == 0;
    s->kind = gguf ? RAD_SPEC_GGUF : RAD_SPEC_RAD;
    return RAD_OK;
}

int rad_model_spec_parse_in(const char *text, const char *const *alias_files, int n_files, RadModelSpec *s)
{
    memset(s, 0, sizeof *s);
    if (!text || !*text) return rad_error_set(RAD_E_ARG, "no model given");
    if (strlen(text) >= RAD_SPEC_PATH_MAX) return rad_error_set(RAD_E_ARG, "model name too long");
    if (strncmp(text, "hf:", 3) == 0) return parse_hub(text, text + 3, s);

    size_t n = strlen(text);
    int looks_like_path = strchr(text, '/') || (n > 4 && strcmp(text + n - 4, ".rad") == 0) ||
                          (n > 5 && strcmp(text + n - 5, ".gguf") == 0);
    if (looks_like_path) return parse_path(text, s);

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
    const char *v = getenv("RADIANCE_MODELS");
    if (v && *v && n < max) files[n++] = strdup(v);
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char *s = NULL;
    if (xdg && *xdg) {
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

static int select_gguf(const RadHfTree *t, const char *quant, const char *file, const char *what,
                       RadSelection *s)
{
    int best = -1;
    for (int i = 0; i < t->n; i++) {
        const char *p = t->files[i].path;
        if (!has_suffix(p, ".gguf") || strstr(base_name(p), "mmproj")) continue;
        int match = file && *file ? strcmp(p, file) == 0 : names_quant(base_name(p), quant);
        if (!match) continue;
        size_t prefix;
        int part, count;
        if (split_part(p, &prefix, &part, &count) && part != 1) continue; /* a group is found by its part 1 */
        if (best < 0 || depth_of(p) < depth_of(t->files[best].path) ||
            (depth_of(p) == depth_of(t->files[best].path) && strcmp(p, t->files[best].path) < 0))
            best = i;
    }
    if (best < 0) {
        /* Name what there is, so the user can pick. */
        char avail[600] = "";
        size_t used = 0;
        int shown = 0;
        for (int i = 0; i < t->n && shown < 8; i++) {
            const char *p = t->files[i].path;
            size_t prefix;
            int part, count;
            if (!has_suffix(p, ".gguf") || strstr(base_name(p), "mmproj")) continue;
            if (split_part(p, &prefix, &part, &count) && part != 1) continue;
            int w = snprintf(avail + used, sizeof avail - used, "%s%s", shown ? ", " : "", base_name(p));
            if (w < 0 || (size_t)w >= sizeof avail - used) break;
            used += (size_t)w;
            shown++;
        }
        if (file && *file)
            return rad_error_set(RAD_E_NOTFOUND, "%s: no file '%s'; GGUF files here: %s", what, file, avail);
        return rad_error_set(RAD_E_NOTFOUND,
                             "%s: no GGUF file for quant %s; files here: %s (pick one with :QUANT)", what,
                             quant, avail);
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
    snprintf(s->quant, sizeof s->quant, "%s", file && *file ? "" : quant);
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
        rc = select_gguf(t, quant && *quant ? quant : RAD_DEFAULT_GGUF_QUANT, file, what, out);
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
