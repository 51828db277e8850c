/*
** hub.c: the Hugging Face Hub client.  hub.h says what it promises; this
** file is in five parts:
**
**   1. the client: endpoint, token, offline switch, the cache;
**   2. requests: URLs, the origin rule for the Authorization header, one
**      blocking GET with retries and hand-followed redirects (the API);
**   3. answers that refuse us, turned into sentences that say what to do;
**   4. downloads: a state machine per file driven by curl multi, hashing
**      as bytes arrive, resuming, retrying, verifying, renaming, linking;
**   5. progress, and the fetch that ties it together.
**
** Nothing here trusts the server with a path: the repo and revision are
** checked before they go into a URL, and every name in a listing is checked
** by hf_cache.c before it becomes a file.
*/
#include "hub.h"
#include "safe_fs.h"
#include "../cli.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#ifndef RAD_VERSION
#define RAD_VERSION "0.1.0"
#endif

#define DEFAULT_ENDPOINT "https://huggingface.co"
#define DEFAULT_JOBS     4
#define MAX_REDIRECTS    8
#define MAX_FAILS        6  /* failed attempts in a row, without progress, before giving up */
#define MAX_ATTEMPTS     60 /* requests for one file, whatever happens */
#define MAX_API_BODY     (64u << 20)
#define MAX_PAGES        10000
#define ERR_BODY         2048

/* ============================================================ 1. the client */

struct RadHub {
    RadHubOptions opt;
    RadHfCache cache;
    char *endpoint;          /* no trailing '/' */
    char *origin;            /* "scheme://host:port" of the endpoint, lowercased */
    char *token;             /* NULL: anonymous */
    char *token_source;      /* "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN" or the file */
    const char *offline_why; /* "HF_HUB_OFFLINE=1", "--offline" */
    char user_agent[96];
    CURL *api;      /* the handle for API requests */
    CURLM *multi;   /* the handle for downloads */
    int curl_ready; /* curl_global_init succeeded: clean up once */
    int drawn;      /* live progress lines now on the terminal */
    double last_draw;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int truthy(const char *v)
{
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

/* "scheme://host:port" of url, lowercased, or NULL when url is not http(s). */
static char *origin_of(const char *url)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *out = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        (!strcasecmp(scheme, "http") || !strcasecmp(scheme, "https"))) {
        if (asprintf(&out, "%s://%s:%s", scheme, host, port) < 0) out = NULL;
        for (char *p = out; p && *p; p++) *p = (char)tolower((unsigned char)*p);
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return out;
}

/* Trim a token and refuse what cannot go in a header line. */
static int take_token(RadHub *h, const char *value, const char *source)
{
    while (*value && isspace((unsigned char)*value)) value++;
    size_t n = strlen(value);
    while (n && isspace((unsigned char)value[n - 1])) n--;
    if (n == 0) return RAD_OK;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)value[i] < 0x21 || (unsigned char)value[i] > 0x7e)
            return rad_error_set(RAD_E_ARG,
                                 "the token from %s holds a space or control character; "
                                 "it cannot be sent: copy it again from the token page",
                                 source);
    h->token = strndup(value, n);
    h->token_source = strdup(source);
    return h->token && h->token_source ? RAD_OK : rad_error_set(RAD_E_NOMEM, "out of memory");
}

/* HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then the token file. */
static int find_token(RadHub *h)
{
    const char *v;
    if ((v = getenv("HF_TOKEN")) && *v) return take_token(h, v, "HF_TOKEN");
    if ((v = getenv("HUGGING_FACE_HUB_TOKEN")) && *v) return take_token(h, v, "HUGGING_FACE_HUB_TOKEN");
    char *path = NULL;
    if ((v = getenv("HF_TOKEN_PATH")) && *v)
        path = strdup(v);
    else if (asprintf(&path, "%s/token", h->cache.home) < 0)
        path = NULL;
    if (!path) return rad_error_set(RAD_E_NOMEM, "out of memory");
    FILE *f = fopen(path, "r");
    int rc = RAD_OK;
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        rc = take_token(h, buf, path);
    }
    free(path);
    return rc;
}

int rad_hub_open(const RadHubOptions *o, RadHub **out)
{
    *out = NULL;
    RadHub *h = calloc(1, sizeof *h);
    if (!h) return rad_error_set(RAD_E_NOMEM, "out of memory");
    if (o) h->opt = *o;
    if (!h->opt.log) h->opt.log = stderr;
    if (h->opt.jobs <= 0) h->opt.jobs = DEFAULT_JOBS;
    if (h->opt.offline)
        h->offline_why = "--offline";
    else if (truthy(getenv("HF_HUB_OFFLINE")))
        h->opt.offline = 1, h->offline_why = "HF_HUB_OFFLINE=1";
    int rc = rad_hf_cache_init(&h->cache);
    if (rc) goto fail;
    const char *ep = getenv("HF_ENDPOINT");
    h->endpoint = strdup(ep && *ep ? ep : DEFAULT_ENDPOINT);
    if (!h->endpoint) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t n = strlen(h->endpoint); n && h->endpoint[n - 1] == '/';) h->endpoint[--n] = 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        rc = rad_error_set(RAD_E_IO, "libcurl could not start");
        goto fail;
    }
    h->curl_ready = 1;
    if (!(h->origin = origin_of(h->endpoint))) {
        rc = rad_error_set(RAD_E_ARG, "HF_ENDPOINT '%s' is not an http:// or https:// URL", h->endpoint);
        goto fail;
    }
    if ((rc = find_token(h))) goto fail;
    snprintf(h->user_agent, sizeof h->user_agent, "radiance/%s; %s", RAD_VERSION, curl_version());
    *out = h;
    return RAD_OK;
fail:
    rad_hub_close(h);
    return rc;
}

void rad_hub_close(RadHub *h)
{
    if (!h) return;
    if (h->api) curl_easy_cleanup(h->api);
    if (h->multi) curl_multi_cleanup(h->multi);
    if (h->curl_ready) curl_global_cleanup();
    rad_hf_cache_free(&h->cache);
    free(h->endpoint);
    free(h->origin);
    free(h->token);
    free(h->token_source);
    free(h);
}

const RadHfCache *rad_hub_cache(const RadHub *h)
{
    return &h->cache;
}
int rad_hub_is_offline(const RadHub *h)
{
    return h->opt.offline;
}

const char *rad_hub_format_bytes(int64_t n, char *buf, size_t cap)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(buf, cap, "%lld B", (long long)n);
        return buf;
    }
    double v = (double)n / 1024;
    int u = 0;
    while (v >= 1024 && u < 3) v /= 1024, u++;
    snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

/* ============================================================ 2. requests */

/* Percent-encode s for a URL path; '/' is kept when keep_slash. */
static char *escape(const char *s, int keep_slash)
{
    char *out = malloc(strlen(s) * 3 + 1), *o = out;
    if (!out) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || strchr("-._~", *p) || (keep_slash && *p == '/'))
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = 0;
    return out;
}

/* The headers of one request: the Authorization header only when the URL
** is on the hub's own origin.  This, and following redirects ourselves, is
** what keeps the token from a CDN or any host a redirect names. */
static struct curl_slist *request_headers(const RadHub *h, const char *url)
{
    struct curl_slist *list = curl_slist_append(NULL, "Accept-Encoding: identity");
    char *origin = origin_of(url);
    if (list && h->token && origin && strcmp(origin, h->origin) == 0) {
        char line[1200];
        snprintf(line, sizeof line, "Authorization: Bearer %s", h->token);
        struct curl_slist *more = curl_slist_append(list, line);
        if (!more) {
            curl_slist_free_all(list);
            list = NULL;
        } else {
            list = more;
        }
    }
    free(origin);
    return list;
}

static void common_options(const RadHub *h, CURL *c, const char *url, struct curl_slist *headers)
{
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, h->user_agent);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* we follow, deciding the headers each time */
    curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled connection fails after 30 s */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

/* A redirect target, refused when it would drop from https to http. */
static int redirect_ok(const RadHub *h, const char *from, const char *to)
{
    if (!to || !*to) return rad_error_set(RAD_E_IO, "%s: a redirect without a Location", from);
    if (!strncasecmp(from, "https:", 6) && strncasecmp(to, "https:", 6))
        return rad_error_set(RAD_E_IO, "%s: refusing a redirect from https to '%.200s'", from, to);
    (void)h;
    return RAD_OK;
}

/* The headers an answer may carry that we act on. */
typedef struct Answer {
    long status;
    char error_code[64];     /* X-Error-Code: GatedRepo, RepoNotFound, RevisionNotFound, ... */
    char error_message[256]; /* X-Error-Message */
    char link_next[2048];    /* Link: <URL>; rel="next" */
    char linked_etag[80];    /* X-Linked-Etag */
    char repo_commit[48];    /* X-Repo-Commit */
    char content_range[96];
    double retry_after; /* seconds, 0 when absent */
} Answer;

/* Copy a header's value, trimmed, into dst when line is "Name: value". */
static int header_value(const char *line, size_t len, const char *name, char *dst, size_t cap)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':') return 0;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && isspace((unsigned char)*v)) v++;
    while (end > v && isspace((unsigned char)end[-1])) end--;
    size_t m = (size_t)(end - v);
    if (m >= cap) m = cap - 1;
    memcpy(dst, v, m);
    dst[m] = 0;
    return 1;
}

/* Take the URL of rel="next" from a Link header value. */
static void parse_link(const char *value, char *dst, size_t cap)
{
    for (const char *p = value; (p = strchr(p, '<'));) {
        const char *end = strchr(p, '>');
        if (!end) return;
        const char *next = strchr(end, ',');
        const char *rel = strstr(end, "rel=\"next\"");
        if (rel && (!next || rel < next) && (size_t)(end - p - 1) < cap) {
            memcpy(dst, p + 1, (size_t)(end - p - 1));
            dst[end - p - 1] = 0;
            return;
        }
        p = end;
    }
}

/* Feed one header line into an Answer; a status line starts a fresh one. */
static void answer_header(Answer *a, const char *line, size_t len)
{
    char value[2048];
    if (len > 5 && strncmp(line, "HTTP/", 5) == 0) {
        memset(a, 0, sizeof *a);
        const char *sp = memchr(line, ' ', len);
        if (sp) a->status = strtol(sp + 1, NULL, 10);
        return;
    }
    if (header_value(line, len, "X-Error-Code", a->error_code, sizeof a->error_code)) return;
    if (header_value(line, len, "X-Error-Message", a->error_message, sizeof a->error_message)) return;
    if (header_value(line, len, "X-Linked-Etag", value, sizeof value)) {
        /* W/"abc" -> abc */
        const char *v = strncmp(value, "W/", 2) == 0 ? value + 2 : value;
        size_t n = strlen(v);
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
        snprintf(a->linked_etag, sizeof a->linked_etag, "%.*s", (int)n, v);
        return;
    }
    if (header_value(line, len, "X-Repo-Commit", a->repo_commit, sizeof a->repo_commit)) return;
    if (header_value(line, len, "Content-Range", a->content_range, sizeof a->content_range)) return;
    if (header_value(line, len, "Link", value, sizeof value)) {
        parse_link(value, a->link_next, sizeof a->link_next);
        return;
    }
    if (header_value(line, len, "Retry-After", value, sizeof value)) {
        double s = strtod(value, NULL);
        a->retry_after = s > 0 ? (s > 60 ? 60 : s) : 0;
    }
}

static int retryable_status(long s)
{
    return s == 408 || s == 429 || (s >= 500 && s <= 599);
}

static int retryable_curl(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;
    }
}

/* Wait before attempt `fails` + 1: 0.5 s, 1 s, 2 s, ... at most 10 s, or
** what the server asked for with Retry-After. */
static double backoff(int fails, double retry_after)
{
    if (retry_after > 0) return retry_after;
    double s = 0.5 * pow(2, fails - 1);
    return s > 10 ? 10 : s;
}

/* The body of an API answer. */
typedef struct Body {
    char *data;
    size_t len, cap;
    int too_big;
} Body;

static size_t body_write(char *p, size_t size, size_t n, void *user)
{
    Body *b = user;
    size_t len = size * n;
    if (b->len + len + 1 > MAX_API_BODY) {
        b->too_big = 1;
        return 0;
    }
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + len + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return 0;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, len);
    b->len += len;
    b->data[b->len] = 0;
    return len;
}

static size_t answer_write_header(char *p, size_t size, size_t n, void *user)
{
    answer_header(user, p, size * n);
    return size * n;
}

/* GET url into body (reset first), following redirects and retrying what
** can be retried.  Returns 0 with the final answer in *a, whatever its
** status; RAD_E_IO when no answer came (the message names the URL). */
static int api_get(RadHub *h, const char *url, Answer *a, Body *body)
{
    if (!h->api && !(h->api = curl_easy_init())) return rad_error_set(RAD_E_NOMEM, "out of memory");
    char *cur = strdup(url);
    if (!cur) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int fails = 0, redirects = 0, rc = RAD_OK;
    for (;;) {
        body->len = 0;
        body->too_big = 0;
        if (body->data) body->data[0] = 0;
        memset(a, 0, sizeof *a);
        struct curl_slist *headers = request_headers(h, cur);
        curl_easy_reset(h->api);
        common_options(h, h->api, cur, headers);
        curl_easy_setopt(h->api, CURLOPT_WRITEFUNCTION, body_write);
        curl_easy_setopt(h->api, CURLOPT_WRITEDATA, body);
        curl_easy_setopt(h->api, CURLOPT_HEADERFUNCTION, answer_write_header);
        curl_easy_setopt(h->api, CURLOPT_HEADERDATA, a);
        curl_easy_setopt(h->api, CURLOPT_TIMEOUT, 120L);
        CURLcode res = curl_easy_perform(h->api);
        curl_slist_free_all(headers);
        if (res == CURLE_OK && a->status >= 300 && a->status < 400) {
            char *to = NULL;
            curl_easy_getinfo(h->api, CURLINFO_REDIRECT_URL, &to);
            if ((rc = redirect_ok(h, cur, to))) break;
            if (++redirects > MAX_REDIRECTS) {
                rc = rad_error_set(RAD_E_IO, "%s: more than %d redirects", url, MAX_REDIRECTS);
                break;
            }
            char *next = strdup(to);
            free(cur);
            if (!(cur = next)) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            continue;
        }
        if (res == CURLE_WRITE_ERROR && body->too_big) {
            rc = rad_error_set(RAD_E_IO, "%s: the answer is larger than %u MiB", cur, MAX_API_BODY >> 20);
            break;
        }
        int again = res == CURLE_OK ? retryable_status(a->status) : retryable_curl(res);
        if (!again) {
            if (res != CURLE_OK)
                rc = rad_error_set(RAD_E_IO,
                                   "%s: %s; check the network or HF_ENDPOINT (for cached models: "
                                   "HF_HUB_OFFLINE=1)",
                                   cur, curl_easy_strerror(res));
            break;
        }
        if (++fails >= MAX_FAILS) {
            if (res != CURLE_OK)
                rc = rad_error_set(RAD_E_IO,
                                   "%s: %s after %d attempts; check the network or HF_ENDPOINT "
                                   "(for cached models: HF_HUB_OFFLINE=1)",
                                   cur, curl_easy_strerror(res), fails);
            break; /* a status: the caller words it */
        }
        double wait = backoff(fails, res == CURLE_OK ? a->retry_after : 0);
        if (!h->opt.quiet)
            fprintf(h->opt.log, "radiance: %s: %s; trying again in %.1f s\n", rad_safe(cur),
                    res == CURLE_OK ? "the hub is busy" : curl_easy_strerror(res), wait);
        sleep_s(wait);
    }
    free(cur);
    return rc;
}

/* ============================================ 3. answers that refuse us */

/* One sentence for a refusal: what happened and what to do.  `repo` and
** `what` (the revision or file) name the thing asked for. */
static int refusal(const RadHub *h, const Answer *a, const char *url, const char *repo, const char *what)
{
    const char *code = a->error_code;
    const char *ep = h->endpoint;
    if (!strcmp(code, "GatedRepo") && (a->status == 401 || !h->token))
        return rad_error_set(
            RAD_E_IO,
            "%s is gated: accept its licence on %s/%s while signed in, then set HF_TOKEN to a "
            "read token of that account (%s/settings/tokens)",
            repo, ep, repo, ep);
    if (!strcmp(code, "GatedRepo"))
        return rad_error_set(RAD_E_IO,
                             "%s is gated and the account of the token from %s has no access yet: accept the "
                             "licence on %s/%s (approval can take a while), then try again",
                             repo, h->token_source, ep, repo);
    if (a->status == 401 && h->token)
        return rad_error_set(
            RAD_E_IO,
            "%s: the hub refused the token from %s (401): it is invalid or expired, or %s is not "
            "visible to its account; make a new one at %s/settings/tokens",
            repo, h->token_source, repo, ep);
    if (a->status == 401)
        return rad_error_set(
            RAD_E_IO,
            "%s: the hub answered 401: the repository does not exist, or it is private or gated "
            "and needs a token; check the name, and for a private or gated model accept its "
            "licence on %s/%s and set HF_TOKEN (%s/settings/tokens)",
            repo, ep, repo, ep);
    if (a->status == 403)
        return rad_error_set(RAD_E_IO, "%s: access refused (403)%s%s; the token needs read access to it",
                             repo, h->token ? " for the token from " : " without a token",
                             h->token ? h->token_source : "");
    if (a->status == 404 && !strcmp(code, "RevisionNotFound"))
        return rad_error_set(RAD_E_NOTFOUND, "%s has no revision '%s' (404): check the branch, tag or commit",
                             repo, what);
    if (a->status == 404 && !strcmp(code, "EntryNotFound"))
        return rad_error_set(RAD_E_NOTFOUND, "%s: the file '%s' is not in the repository (404)", repo, what);
    if (a->status == 404)
        return rad_error_set(RAD_E_NOTFOUND, "%s: not found on %s (404): check the name (ORG/NAME)", repo,
                             ep);
    return rad_error_set(RAD_E_IO, "%s: HTTP %ld%s%s", url, a->status, a->error_message[0] ? ": " : "",
                         a->error_message);
}

/* ------------------------------------------------- revision and listing */

/* The commit `rev` names on the hub. */
static int hub_commit(RadHub *h, const char *repo, const char *rev, char commit[RAD_HF_COMMIT_LEN + 1])
{
    char *erev = escape(rev, 0), *url = NULL;
    if (!erev || asprintf(&url, "%s/api/models/%s/revision/%s", h->endpoint, repo, erev) < 0) {
        free(erev);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    free(erev);
    Answer a;
    Body body = {0};
    int rc = api_get(h, url, &a, &body);
    if (!rc && a.status != 200) rc = refusal(h, &a, url, repo, rev);
    if (!rc) {
        json_error_t jerr;
        json_t *root = json_loadb(body.data ? body.data : "", body.len, 0, &jerr);
        const char *sha = json_string_value(json_object_get(root, "sha"));
        if (!sha || !rad_hf_is_commit(sha))
            rc = rad_error_set(RAD_E_FORMAT, "%s: the answer holds no commit sha", url);
        else
            memcpy(commit, sha, RAD_HF_COMMIT_LEN + 1);
        json_decref(root);
    }
    free(body.data);
    free(url);
    return rc;
}

/* The listing at commit from the tree API, page by page (Link: rel=next,
** followed only on the hub's own origin), into t. */
static int hub_listing(RadHub *h, const char *repo, const char *commit, RadHfTree *t)
{
    char *url = NULL, what[300];
    snprintf(what, sizeof what, "%s@%.12s", repo, commit);
    if (asprintf(&url, "%s/api/models/%s/tree/%s?recursive=true", h->endpoint, repo, commit) < 0)
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    Body body = {0};
    Answer a;
    int rc = RAD_OK, pages = 0;
    while (url && !rc) {
        if (++pages > MAX_PAGES) {
            rc = rad_error_set(RAD_E_FORMAT, "%s: the listing goes on past %d pages", what, MAX_PAGES);
            break;
        }
        if ((rc = api_get(h, url, &a, &body))) break;
        if (a.status != 200) {
            rc = refusal(h, &a, url, repo, commit);
            break;
        }
        if ((rc = rad_hf_tree_add_page(t, body.data ? body.data : "", body.len, what))) break;
        free(url);
        url = NULL;
        if (a.link_next[0]) {
            char *origin = origin_of(a.link_next);
            if (!origin || strcmp(origin, h->origin) != 0)
                rc = rad_error_set(RAD_E_FORMAT,
                                   "%s: the next page of the listing is on another host (%.200s); "
                                   "refusing it",
                                   what, a.link_next);
            else if (!(url = strdup(a.link_next)))
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
            free(origin);
        }
    }
    free(url);
    free(body.data);
    return rc;
}

/* ============================================================ 4. downloads */

typedef enum { T_WAIT, T_ACTIVE, T_DONE, T_FAILED } TransferState;

typedef struct Transfer {
    RadHub *h;
    const char *repo, *commit;
    const RadHfFile *f;
    const char *etag;         /* the blob name: f's sha256 or sha1 */
    int lfs;                  /* verify sha256 (LFS) or the git blob sha1 */
    char *blob, *part, *lock; /* blobs/ETAG, blobs/ETAG.incomplete, the lock file */
    char *url;                /* the resolve URL on the hub */
    char *cur;                /* where the next request goes (after redirects) */
    int redirects;
    int state;   /* TransferState */
    double wake; /* T_WAIT: not before this time */
    int fd, lock_fd;
    EVP_MD_CTX *md;    /* holds every byte in part[0, have) */
    int64_t have;      /* bytes in the .incomplete file */
    int64_t asked;     /* the Range start of the request in flight */
    int64_t got;       /* bytes the request in flight delivered */
    int64_t run_bytes; /* bytes transferred by this process */
    double run_start;  /* when this process first asked */
    int fails, attempts;
    int said_waiting, printed;
    CURL *easy;
    struct curl_slist *headers;
    Answer a;
    int body_is_file; /* this answer's body is the file's bytes */
    int restart;      /* the answer cannot be resumed: start over */
    char why[512];    /* why the write callback stopped the transfer */
    int fatal;        /* ... and that it must not be retried */
    Body errbody;     /* the start of an error answer's body */
} Transfer;

static void md_restart(Transfer *t)
{
    EVP_DigestInit_ex(t->md, t->lfs ? EVP_sha256() : EVP_sha1(), NULL);
    if (!t->lfs) {
        /* git hashes "blob SIZE\0" followed by the bytes */
        char head[40];
        int n = snprintf(head, sizeof head, "blob %lld", (long long)t->f->size);
        EVP_DigestUpdate(t->md, head, (size_t)n + 1);
    }
}

static void say(RadHub *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int is_tty(const RadHub *h)
{
    return !h->opt.quiet && isatty(fileno(h->opt.log));
}

/* Take the live progress lines off the terminal (they are redrawn below
** whatever is printed next). */
static void erase_live(RadHub *h)
{
    if (h->drawn && is_tty(h)) fprintf(h->opt.log, "\033[%dA\r\033[J", h->drawn);
    h->drawn = 0;
}

/* A progress note ("radiance: ..."); nothing when quiet.  The notes name
** files the hub listed, so they are printed terminal-safe (rad_safe). */
static void say(RadHub *h, const char *fmt, ...)
{
    if (h->opt.quiet) return;
    erase_live(h);
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0) line = NULL;
    va_end(ap);
    fprintf(h->opt.log, "radiance: %s\n", line ? rad_safe(line) : "(out of memory)");
    free(line);
    fflush(h->opt.log);
}

/* Header callback: collect the answer; at its end decide what the body is. */
static size_t t_header(char *p, size_t size, size_t n, void *user)
{
    Transfer *t = user;
    size_t len = size * n;
    answer_header(&t->a, p, len);
    if (len > 2 || (p[0] != '\r' && p[0] != '\n')) return len;
    /* The blank line: the headers are complete. */
    long s = t->a.status;
    t->body_is_file = 0;
    if (t->a.linked_etag[0] && strcmp(t->a.linked_etag, t->etag) != 0) {
        snprintf(t->why, sizeof t->why,
                 "%s: the hub's ETag (%.70s) differs from the listing's (%s); the "
                 "repository changed under us, try again",
                 t->f->path, t->a.linked_etag, t->etag);
        t->fatal = 1;
        return 0;
    }
    if (t->a.repo_commit[0] && strcmp(t->a.repo_commit, t->commit) != 0) {
        snprintf(t->why, sizeof t->why, "%s: the hub served commit %.48s, not %s", t->f->path,
                 t->a.repo_commit, t->commit);
        t->fatal = 1;
        return 0;
    }
    if (s == 200) {
        if (t->asked > 0) {
            /* A Range ignored (a proxy, a CDN that gzips): the body is the
            ** whole file, so the partial file and its hash start over. */
            if (ftruncate(t->fd, 0) != 0) {
                snprintf(t->why, sizeof t->why, "%s: %s", t->part, strerror(errno));
                t->fatal = 1;
                return 0;
            }
            t->have = 0;
            t->asked = 0;
            md_restart(t);
            say(t->h, "%s: the server ignored the range request; starting over", t->f->path);
        }
        t->body_is_file = 1;
    } else if (s == 206) {
        long long from = -1, total = -1;
        if (sscanf(t->a.content_range, "bytes %lld-%*d/%lld", &from, &total) < 1 || from != t->asked) {
            snprintf(t->why, sizeof t->why, "%s: the server answered range %lld- with '%.60s'", t->f->path,
                     (long long)t->asked, t->a.content_range);
            t->restart = 1;
            return 0;
        }
        if (total >= 0 && total != t->f->size) {
            snprintf(t->why, sizeof t->why, "%s: the server says %lld bytes, the listing %lld", t->f->path,
                     total, (long long)t->f->size);
            t->fatal = 1;
            return 0;
        }
        t->body_is_file = 1;
    }
    return len;
}

/* Write callback: file bytes go to disk and into the hash; anything else
** is kept (a little of it) for the error message. */
static size_t t_write(char *p, size_t size, size_t n, void *user)
{
    Transfer *t = user;
    size_t len = size * n;
    if (!t->body_is_file) {
        if (t->errbody.len < ERR_BODY) body_write(p, 1, len < ERR_BODY ? len : ERR_BODY, &t->errbody);
        return len;
    }
    if (t->have + (int64_t)len > t->f->size) {
        snprintf(t->why, sizeof t->why, "%s: the server sent more than the %lld bytes listed", t->f->path,
                 (long long)t->f->size);
        t->restart = 1;
        return 0;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = pwrite(t->fd, p + off, len - off, (off_t)t->have + (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(t->why, sizeof t->why, "%s: cannot write: %s", t->part,
                     w < 0 ? strerror(errno) : "no space");
            t->fatal = 1;
            return 0;
        }
        off += (size_t)w;
    }
    EVP_DigestUpdate(t->md, p, len);
    t->have += (int64_t)len;
    t->got += (int64_t)len;
    t->run_bytes += (int64_t)len;
    return len;
}

static void t_release(Transfer *t)
{
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    rad_hf_unlock(t->lock_fd);
    t->lock_fd = -1;
}

static int t_fail(Transfer *t, int code)
{
    t->state = T_FAILED;
    t_release(t);
    return code;
}

/* blobs/ETAG: 1 when it is a plain file of `size` bytes (any size when
** size < 0), 0 when absent or of another size, negative when something
** else stands there (a link, a file with other hard links): refused, named. */
static int blob_state(const RadHub *h, const char *blob, int64_t size)
{
    struct stat st;
    int rc = rad_sfs_lstat(h->cache.hub, blob, &st);
    if (rc == RAD_E_NOTFOUND) {
        rad_error_clear();
        return 0;
    }
    if (rc) return rc;
    if (S_ISLNK(st.st_mode)) return rad_sfs_refuse_link(blob, "a downloaded file");
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
        return rad_error_set(RAD_E_IO, "%s: not a plain file (%s); refusing it: remove it and pull again", blob,
                             S_ISREG(st.st_mode) ? "it has other hard links" : "not a regular file");
    return size < 0 || st.st_size == size;
}

/* The bytes are all there: compare the hash, then rename and link. */
static int t_finish(Transfer *t)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    EVP_DigestFinal_ex(t->md, digest, &n);
    for (unsigned i = 0; i < n; i++) sprintf(hex + 2 * i, "%02x", digest[i]);
    hex[2 * n] = 0;
    if (strcmp(hex, t->etag) != 0) {
        rad_sfs_unlink(t->h->cache.hub, t->part);
        return t_fail(
            t, rad_error_set(RAD_E_FORMAT,
                             "%s: %s mismatch: the listing says %s, the download hashes to %s; the "
                             "corrupt download was deleted (the server or a proxy sent bad bytes); run "
                             "the command again",
                             t->f->path, t->lfs ? "sha256" : "git sha1", t->etag, hex));
    }
    if (fsync(t->fd) != 0)
        return t_fail(t, rad_error_set(RAD_E_IO, "%s: cannot write: %s", t->part, strerror(errno)));
    int st = blob_state(t->h, t->blob, -1);
    if (st < 0) return t_fail(t, st);
    if ((st = rad_sfs_rename(t->h->cache.hub, t->part, t->blob))) return t_fail(t, st);
    t_release(t);
    int rc = rad_hf_link(&t->h->cache, t->repo, t->commit, t->f->path, t->etag);
    if (rc) return t_fail(t, rc);
    t->state = T_DONE;
    if (!is_tty(t->h)) say(t->h, "%s: verified %s", t->f->path, t->lfs ? "sha256" : "git sha1");
    return RAD_OK;
}

/* Open (once) the lock and the partial file, hashing what it already holds. */
static int t_open(Transfer *t, int *busy)
{
    *busy = 0;
    int rc = rad_hf_lock(&t->h->cache, t->lock, 0, &t->lock_fd);
    if (rc == RAD_E_STATE) {
        *busy = 1;
        rad_error_clear();
        return RAD_OK;
    }
    if (rc) return rc;
    /* The partial file's name is fixed (resuming needs it, and other tools
    ** use it): opened without following a link, and refused unless it is a
    ** plain file of its own, so a planted link or hard link is never
    ** truncated or written into. */
    t->fd = rad_sfs_open_file(t->h->cache.hub, t->part, O_RDWR | O_CREAT, 0644);
    if (t->fd < 0) {
        int rc2 = t->fd;
        t->fd = -1;
        return rc2 == RAD_E_NOTFOUND ? rad_error_set(RAD_E_IO, "%s: cannot open", t->part) : rc2;
    }
    struct stat st;
    if (fstat(t->fd, &st) != 0) return rad_error_set(RAD_E_IO, "%s: %s", t->part, strerror(errno));
    if (st.st_size > t->f->size && ftruncate(t->fd, 0) != 0)
        return rad_error_set(RAD_E_IO, "%s: %s", t->part, strerror(errno));
    md_restart(t);
    t->have = 0;
    /* The hash cannot be saved with the partial file, so it is rebuilt. */
    int64_t keep = st.st_size > t->f->size ? 0 : (int64_t)st.st_size;
    char *buf = malloc(1 << 20);
    if (!buf) return rad_error_set(RAD_E_NOMEM, "out of memory");
    while (t->have < keep) {
        ssize_t r = pread(t->fd, buf, 1 << 20, (off_t)t->have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        EVP_DigestUpdate(t->md, buf, (size_t)r);
        t->have += r;
    }
    free(buf);
    if (t->have < keep && ftruncate(t->fd, t->have) != 0)
        return rad_error_set(RAD_E_IO, "%s: %s", t->part, strerror(errno));
    if (t->have > 0) {
        char a[32], b[32];
        say(t->h, "%s: resuming at %s of %s", t->f->path, rad_hub_format_bytes(t->have, a, sizeof a),
            rad_hub_format_bytes(t->f->size, b, sizeof b));
    }
    return RAD_OK;
}

/* Move a waiting transfer on: take the lock, open, and ask for the bytes
** still missing.  Returns 0 or a fatal code. */
static int t_start(Transfer *t)
{
    RadHub *h = t->h;
    if (t->fd < 0) {
        int have = blob_state(h, t->blob, t->f->size);
        if (have < 0) return t_fail(t, have);
        if (have) { /* another process finished it */
            int rc = rad_hf_link(&h->cache, t->repo, t->commit, t->f->path, t->etag);
            t->state = rc ? T_FAILED : T_DONE;
            return rc;
        }
        int busy, rc = t_open(t, &busy);
        if (rc) return t_fail(t, rc);
        if (busy) {
            if (!t->said_waiting) say(h, "%s: waiting for another process downloading it", t->f->path);
            t->said_waiting = 1;
            t->wake = now_s() + 0.5;
            return RAD_OK;
        }
        if ((have = blob_state(h, t->blob, t->f->size)) < 0) return t_fail(t, have);
        if (have) {
            rad_sfs_unlink(h->cache.hub, t->part);
            t_release(t);
            int lrc = rad_hf_link(&h->cache, t->repo, t->commit, t->f->path, t->etag);
            t->state = lrc ? T_FAILED : T_DONE;
            return lrc;
        }
        if (t->run_start == 0) t->run_start = now_s();
        if (!is_tty(h) && t->have == 0) {
            char b[32];
            say(h, "downloading %s (%s)", t->f->path, rad_hub_format_bytes(t->f->size, b, sizeof b));
        }
    }
    if (t->have == t->f->size) return t_finish(t);
    if (++t->attempts > MAX_ATTEMPTS)
        return t_fail(t, rad_error_set(RAD_E_IO, "%s: gave up after %d requests", t->f->path, MAX_ATTEMPTS));
    if (!t->easy && !(t->easy = curl_easy_init()))
        return t_fail(t, rad_error_set(RAD_E_NOMEM, "out of memory"));
    curl_easy_reset(t->easy);
    curl_slist_free_all(t->headers);
    t->headers = request_headers(h, t->cur);
    common_options(h, t->easy, t->cur, t->headers);
    curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, t_header);
    curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, t_write);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    char range[48];
    if (t->have > 0) {
        snprintf(range, sizeof range, "%lld-", (long long)t->have);
        curl_easy_setopt(t->easy, CURLOPT_RANGE, range);
    }
    t->asked = t->have;
    t->got = 0;
    t->why[0] = 0;
    t->fatal = t->restart = 0;
    t->errbody.len = 0;
    memset(&t->a, 0, sizeof t->a);
    if (curl_multi_add_handle(h->multi, t->easy) != CURLM_OK)
        return t_fail(t, rad_error_set(RAD_E_IO, "libcurl refused a transfer"));
    t->state = T_ACTIVE;
    return RAD_OK;
}

/* Schedule another try, or give up when the same failure keeps coming. */
static int t_retry(Transfer *t, const char *reason, double retry_after)
{
    if (t->got > 0) t->fails = 0; /* progress was made */
    t->fails++;
    t->cur = t->url; /* a fresh redirect: signed URLs expire */
    t->redirects = 0;
    if (t->fails >= MAX_FAILS)
        return t_fail(t, rad_error_set(RAD_E_IO,
                                       "%s: %s; gave up after %d attempts in a row (run the command "
                                       "again to resume)",
                                       t->f->path, reason, t->fails));
    double wait = backoff(t->fails, retry_after);
    char b[32];
    say(t->h, "%s: %s at %s; %s in %.1f s", t->f->path, reason, rad_hub_format_bytes(t->have, b, sizeof b),
        t->have ? "resuming" : "retrying", wait);
    t->state = T_WAIT;
    t->wake = now_s() + wait;
    return RAD_OK;
}

/* A request ended: decide what comes next.  Returns 0 or a fatal code. */
static int t_done(Transfer *t, CURLcode res)
{
    RadHub *h = t->h;
    curl_multi_remove_handle(h->multi, t->easy);
    long s = t->a.status;
    if (t->restart) {
        if (ftruncate(t->fd, 0) != 0)
            return t_fail(t, rad_error_set(RAD_E_IO, "%s: %s", t->part, strerror(errno)));
        t->have = 0;
        t->got = 0; /* bytes thrown away are no progress */
        md_restart(t);
        return t_retry(t, t->why, 0);
    }
    if (t->fatal) return t_fail(t, rad_error_set(RAD_E_IO, "%s", t->why));
    if (res == CURLE_OK && s >= 300 && s < 400) {
        char *to = NULL;
        curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_URL, &to);
        int rc = redirect_ok(h, t->cur, to);
        if (rc) return t_fail(t, rc);
        if (++t->redirects > MAX_REDIRECTS)
            return t_fail(t, rad_error_set(RAD_E_IO, "%s: more than %d redirects", t->url, MAX_REDIRECTS));
        char *copy = strdup(to);
        if (!copy) return t_fail(t, rad_error_set(RAD_E_NOMEM, "out of memory"));
        if (t->cur != t->url) free(t->cur);
        t->cur = copy;
        t->attempts--; /* following is not trying again */
        t->state = T_WAIT;
        t->wake = 0;
        return RAD_OK;
    }
    if (t->cur != t->url) { /* the next request starts at the hub again */
        free(t->cur);
        t->cur = t->url;
    }
    if (res == CURLE_OK && (s == 200 || s == 206)) {
        if (t->have == t->f->size) return t_finish(t);
        return t_retry(t, "the connection ended early", 0);
    }
    if (res == CURLE_OK && s == 416) {
        if (t->have == t->f->size) return t_finish(t);
        if (ftruncate(t->fd, 0) != 0)
            return t_fail(t, rad_error_set(RAD_E_IO, "%s: %s", t->part, strerror(errno)));
        t->have = 0;
        md_restart(t);
        return t_retry(t, "the server refused the range", 0);
    }
    if (res == CURLE_OK && retryable_status(s)) {
        char reason[48];
        snprintf(reason, sizeof reason, "HTTP %ld", s);
        return t_retry(t, reason, t->a.retry_after);
    }
    if (res == CURLE_OK) return t_fail(t, refusal(h, &t->a, t->cur, t->repo, t->f->path));
    if (retryable_curl(res)) return t_retry(t, curl_easy_strerror(res), 0);
    return t_fail(t, rad_error_set(RAD_E_IO, "%s: %s", t->url, curl_easy_strerror(res)));
}

/* ------------------------------------------------------------- progress */

static void fmt_eta(double s, char *buf, size_t cap)
{
    if (!(s >= 0) || s > 359999)
        snprintf(buf, cap, "--:--");
    else if (s >= 3600)
        snprintf(buf, cap, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, cap, "%d:%02d", (int)s / 60, (int)s % 60);
}

/* One file's line: name, bytes, percent, rate, ETA (or how it ended). */
static void progress_line(const Transfer *t, double now, char *line, size_t cap)
{
    char have[32], size[32], rate[32], eta[32];
    /* The name takes what the numbers (about 54 columns) leave, 12 to 40. */
    int w = (int)cap - 55;
    w = w < 12 ? 12 : w > 40 ? 40 : w;
    const char *name = rad_safe(t->f->path);  /* a name the hub chose */
    int n = (int)strlen(name);
    char shown[48];
    if (n > w) {
        /* Keep the start (a shard's number) and the end, drop the middle. */
        int head = (w - 3) * 2 / 3, tail = w - 3 - head;
        snprintf(shown, sizeof shown, "%.*s...%s", head, name, name + n - tail);
    } else
        snprintf(shown, sizeof shown, "%s", name);
    rad_hub_format_bytes(t->have, have, sizeof have);
    rad_hub_format_bytes(t->f->size, size, sizeof size);
    int pct = t->f->size > 0 ? (int)(100.0 * (double)t->have / (double)t->f->size) : 100;
    if (t->state == T_DONE) {
        snprintf(line, cap, "  %-*s %9s  100%%  verified", w, shown, size);
        return;
    }
    if (t->state == T_FAILED) {
        snprintf(line, cap, "  %-*s %9s / %-9s %3d%%  failed", w, shown, have, size, pct);
        return;
    }
    double el = now - t->run_start;
    double bps = el > 0.2 ? (double)t->run_bytes / el : 0;
    if (bps > 0)
        rad_hub_format_bytes((int64_t)bps, rate, sizeof rate);
    else
        snprintf(rate, sizeof rate, "--");
    fmt_eta(bps > 0 ? (double)(t->f->size - t->have) / bps : -1, eta, sizeof eta);
    snprintf(line, cap, "  %-*s %9s / %-9s %3d%%  %9s/s  ETA %s", w, shown, have, size, pct, rate, eta);
}

/* On a terminal: a finished file leaves one line that scrolls up; the
** files in flight are redrawn in place below, at most ten times a second. */
static void display(RadHub *h, Transfer *ts, int n, int force)
{
    if (!is_tty(h)) return;
    double now = now_s();
    if (!force && now - h->last_draw < 0.1) return;
    h->last_draw = now;
    FILE *o = h->opt.log;
    char line[256];
    /* A line wider than the terminal would wrap and break the redraw. */
    struct winsize ws;
    size_t width = sizeof line;
    if (ioctl(fileno(o), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && ws.ws_col < width) width = ws.ws_col;
    erase_live(h);
    for (int i = 0; i < n; i++) {
        Transfer *t = &ts[i];
        if ((t->state == T_DONE || t->state == T_FAILED) && !t->printed && t->run_start > 0) {
            progress_line(t, now, line, width);
            fprintf(o, "%s\n", line);
            t->printed = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        Transfer *t = &ts[i];
        if (t->state == T_ACTIVE || (t->state == T_WAIT && t->run_start > 0)) {
            progress_line(t, now, line, width);
            fprintf(o, "%s\n", line);
            h->drawn++;
        }
    }
    fflush(o);
}

/* ------------------------------------------------------------ the loop */

/* Download files[0..n) of repo at commit, `jobs` at a time. */
static int download_all(RadHub *h, const char *repo, const char *commit, const RadHfFile *const *files, int n)
{
    if (!h->multi && !(h->multi = curl_multi_init())) return rad_error_set(RAD_E_NOMEM, "out of memory");
    Transfer *ts = calloc((size_t)n, sizeof *ts);
    if (!ts) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int rc = RAD_OK;
    for (int i = 0; i < n && !rc; i++) {
        Transfer *t = &ts[i];
        t->h = h;
        t->repo = repo;
        t->commit = commit;
        t->f = files[i];
        t->etag = rad_hf_file_etag(t->f);
        t->lfs = t->f->sha256[0] != 0;
        t->fd = t->lock_fd = -1;
        char *epath = escape(t->f->path, 1);
        t->blob = rad_hf_blob_path(&h->cache, repo, t->etag, "");
        t->part = rad_hf_blob_path(&h->cache, repo, t->etag, ".incomplete");
        t->lock = rad_hf_lock_path(&h->cache, repo, t->etag);
        t->md = EVP_MD_CTX_new();
        if (!epath || asprintf(&t->url, "%s/%s/resolve/%s/%s", h->endpoint, repo, commit, epath) < 0)
            t->url = NULL;
        free(epath);
        t->cur = t->url;
        if (!t->blob || !t->part || !t->lock || !t->md || !t->url)
            rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    if (!rc) {
        char *blobs = rad_hf_blob_path(&h->cache, repo, "", "");
        rc = blobs ? rad_hf_make_dir(&h->cache, blobs) : rad_error_set(RAD_E_NOMEM, "out of memory");
        free(blobs);
    }

    int finished = 0;
    while (!rc && finished < n) {
        double now = now_s(), next_wake = now + 0.1;
        int active = 0;
        for (int i = 0; i < n; i++) active += ts[i].state == T_ACTIVE;
        for (int i = 0; i < n && !rc && active < h->opt.jobs; i++) {
            Transfer *t = &ts[i];
            if (t->state != T_WAIT) continue;
            if (t->wake > now) {
                if (t->wake < next_wake) next_wake = t->wake;
                continue;
            }
            rc = t_start(t);
            if (t->state == T_ACTIVE) active++;
        }
        if (rc) break;
        int running = 0;
        curl_multi_perform(h->multi, &running);
        CURLMsg *msg;
        int left;
        while (!rc && (msg = curl_multi_info_read(h->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            for (int i = 0; i < n; i++)
                if (ts[i].easy == msg->easy_handle && ts[i].state == T_ACTIVE) {
                    rc = t_done(&ts[i], msg->data.result);
                    break;
                }
        }
        finished = 0;
        for (int i = 0; i < n; i++) finished += ts[i].state == T_DONE || ts[i].state == T_FAILED;
        display(h, ts, n, finished == n || rc);
        if (rc || finished == n) break;
        int wait_ms = (int)((next_wake - now_s()) * 1000);
        if (wait_ms < 1) wait_ms = 1;
        if (wait_ms > 100) wait_ms = 100;
        curl_multi_poll(h->multi, NULL, 0, wait_ms, NULL);
    }
    /* Stop what is still running; its partial file stays for next time,
    ** unless nothing reached it (removed while the lock is still ours). */
    for (int i = 0; i < n; i++) {
        Transfer *t = &ts[i];
        if (t->state == T_ACTIVE) {
            curl_multi_remove_handle(h->multi, t->easy);
            t->state = T_FAILED;
        }
        struct stat st;
        if (t->state != T_DONE && t->part && t->fd >= 0 && fstat(t->fd, &st) == 0 && st.st_size == 0)
            rad_sfs_unlink(h->cache.hub, t->part);
        t_release(t);
        if (t->easy) curl_easy_cleanup(t->easy);
        curl_slist_free_all(t->headers);
        if (t->md) EVP_MD_CTX_free(t->md);
        if (t->cur != t->url) free(t->cur);
        free(t->url);
        free(t->blob);
        free(t->part);
        free(t->lock);
        free(t->errbody.data);
    }
    display(h, ts, n, 1);
    erase_live(h);
    free(ts);
    return rc;
}

/* ================================================================ 5. fetch */

/* Is there room for `need` more bytes where the blobs go? */
static int check_space(RadHub *h, const char *repo, int64_t need)
{
    char *dir = rad_hf_blob_path(&h->cache, repo, "", "");
    if (!dir) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int rc = rad_hf_make_dir(&h->cache, dir);
    struct statvfs vfs;
    if (!rc && statvfs(dir, &vfs) == 0) {
        int64_t avail = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
        char a[32], b[32];
        if (need > avail)
            rc = rad_error_set(RAD_E_IO,
                               "%s: the download needs %s more and the disk has %s free; free some "
                               "space or point HF_HUB_CACHE (or HF_HOME) elsewhere",
                               dir, rad_hub_format_bytes(need, a, sizeof a),
                               rad_hub_format_bytes(avail, b, sizeof b));
    }
    free(dir);
    return rc;
}

static int offline_refusal(const RadHub *h, const char *repo, const char *rev, const char *detail)
{
    return rad_error_set(
        RAD_E_NOTFOUND,
        "hf:%s@%s is not in the cache (%s: %s) and %s forbids downloading; pull it while online, "
        "or unset HF_HUB_OFFLINE",
        repo, rev, h->cache.hub, detail, h->offline_why);
}

/* Choose the files from tree and list those the snapshot lacks in
** *missing (a fresh array; the old one is freed). */
static int select_missing(RadHub *h, const char *repo, const char *commit, const RadHfTree *tree,
                          const char *quant, const char *file, const char *what, RadSelection *sel,
                          const RadHfFile ***missing, int *n_missing)
{
    rad_selection_free(sel);
    free(*missing);
    *missing = NULL;
    *n_missing = 0;
    int rc = rad_model_select(tree, quant, file, what, sel);
    if (rc) return rc;
    if (!(*missing = calloc((size_t)sel->n + 1, sizeof **missing)))
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    for (int i = 0; i < sel->n; i++) {
        const RadHfFile *f = &tree->files[sel->idx[i]];
        int has = rad_hf_snapshot_has(&h->cache, repo, commit, f);
        if (has < 0) return has;
        if (!has) (*missing)[(*n_missing)++] = f;
    }
    return RAD_OK;
}

int rad_hub_fetch(RadHub *h, const char *repo, const char *rev, const char *quant, const char *file,
                  RadHubFetch *out)
{
    memset(out, 0, sizeof *out);
    if (!rad_hf_repo_id_ok(repo))
        return rad_error_set(RAD_E_ARG, "'%s' is not a repository id (ORG/NAME)", repo);
    if (!rev || !*rev) rev = "main";
    if (!rad_hf_revision_ok(rev))
        return rad_error_set(RAD_E_ARG, "%s: '%s' is not a branch, tag or commit", repo, rev);
    char what[300];
    int rc = RAD_OK, pinned = rad_hf_is_commit(rev), from_snapshot = 0, n_missing = 0, n_get = 0;
    int64_t need = 0;

    /* 1. The commit. */
    if (pinned) {
        memcpy(out->commit, rev, RAD_HF_COMMIT_LEN + 1);
    } else if (h->opt.offline) {
        rc = rad_hf_ref_read(&h->cache, repo, rev, out->commit);
        if (rc) return offline_refusal(h, repo, rev, "no ref for the revision");
    } else {
        if ((rc = hub_commit(h, repo, rev, out->commit))) return rc;
        if ((rc = rad_hf_ref_write(&h->cache, repo, rev, out->commit))) return rc;
    }
    snprintf(what, sizeof what, "%s@%.12s", repo, out->commit);
    out->snapshot = rad_hf_snapshot_dir(&h->cache, repo, out->commit);
    char *tree_path = rad_hf_tree_path(&h->cache, repo, out->commit);
    RadHfTree tree;
    RadSelection sel = {0};
    const RadHfFile **missing = NULL;
    rad_hf_tree_init(&tree);
    if (!out->snapshot || !tree_path) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto done;
    }

    /* 2. The listing: saved, else what the snapshot holds when another
    ** tool downloaded it (enough when it is complete), else the hub's. */
    rc = rad_hf_tree_load(&h->cache, tree_path, &tree);
    if (rc == RAD_E_FORMAT) say(h, "ignoring a damaged saved listing: %s", rad_error_message());
    int snap_rc = rc && rc != RAD_E_IO ? rad_hf_tree_from_snapshot(&h->cache, out->snapshot, &tree) : RAD_E_NOTFOUND;
    if (rc == RAD_E_IO || (snap_rc && snap_rc != RAD_E_NOTFOUND)) {
        if (rc != RAD_E_IO) rc = snap_rc;      /* a planted link: refused, named */
        goto done;
    }
    if (rc && snap_rc == RAD_OK) {
        from_snapshot = 1;
    } else if (rc && h->opt.offline) {
        rc = offline_refusal(h, repo, rev, "no snapshot of its commit");
        goto done;
    } else if (rc) {
        if ((rc = hub_listing(h, repo, out->commit, &tree))) goto done;
        if ((rc = rad_hf_tree_save(&h->cache, tree_path, &tree))) goto done;
    }
    rad_error_clear();

    /* 3. The files, and which are missing. */
    rc = select_missing(h, repo, out->commit, &tree, quant, file, what, &sel, &missing, &n_missing);
    if (from_snapshot && rc != RAD_E_IO && (rc || n_missing)) {
        /* The snapshot alone is not enough: the hub's listing says what is. */
        if (h->opt.offline) {
            if (rc != RAD_E_NOMEM) rc = offline_refusal(h, repo, rev, "files missing from its snapshot");
            goto done;
        }
        rad_hf_tree_free(&tree);
        if ((rc = hub_listing(h, repo, out->commit, &tree))) goto done;
        if ((rc = rad_hf_tree_save(&h->cache, tree_path, &tree))) goto done;
        rc = select_missing(h, repo, out->commit, &tree, quant, file, what, &sel, &missing, &n_missing);
    }
    if (rc) goto done;
    out->kind = sel.kind;
    out->n_files = sel.n;
    snprintf(out->quant, sizeof out->quant, "%s", sel.quant);
    for (int i = 0; i < sel.n; i++) out->bytes += tree.files[sel.idx[i]].size;
    if (sel.kind == RAD_REPO_GGUF) snprintf(out->sha256, sizeof out->sha256, "%s", tree.files[sel.first].sha256);
    if (sel.kind == RAD_REPO_GGUF &&
        asprintf(&out->gguf_path, "%s/%s", out->snapshot, tree.files[sel.first].path) < 0) {
        out->gguf_path = NULL;
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto done;
    }

    /* 4. Missing files whose blob is already here (another revision, another
    ** tool) are only linked; the rest are downloaded. */
    for (int i = 0; i < n_missing; i++) {
        const RadHfFile *f = missing[i];
        char *blob = rad_hf_blob_path(&h->cache, repo, rad_hf_file_etag(f), "");
        char *part = rad_hf_blob_path(&h->cache, repo, rad_hf_file_etag(f), ".incomplete");
        struct stat st;
        int have = blob && part ? blob_state(h, blob, f->size) : rad_error_set(RAD_E_NOMEM, "out of memory");
        if (have < 0)
            rc = have;
        else if (have)
            rc = rad_hf_link(&h->cache, repo, out->commit, f->path, rad_hf_file_etag(f));
        else {
            int got = rad_sfs_lstat(h->cache.hub, part, &st);
            rad_error_clear();
            need += f->size - (got == 0 && S_ISREG(st.st_mode) && st.st_size <= f->size ? st.st_size : 0);
            missing[n_get++] = f;
        }
        free(blob);
        free(part);
        if (rc) goto done;
    }
    if (n_get && h->opt.offline) {
        rc = offline_refusal(h, repo, rev, "files missing from its snapshot");
        goto done;
    }
    if (n_get) {
        for (int i = 0; i < n_get; i++)
            if (!rad_hf_etag_ok(rad_hf_file_etag(missing[i]))) {
                rc = rad_error_set(RAD_E_FORMAT, "%s: no hash is known for '%s'", what, missing[i]->path);
                goto done;
            }
        if ((rc = check_space(h, repo, need))) goto done;
        char b[32];
        if (!h->opt.quiet)
            say(h, "pulling %s: %d file%s, %s", what, n_get, n_get == 1 ? "" : "s",
                rad_hub_format_bytes(need, b, sizeof b));
        if ((rc = download_all(h, repo, out->commit, missing, n_get))) goto done;
        out->n_downloaded = n_get;
    }
done:
    free(missing);
    free(tree_path);
    rad_selection_free(&sel);
    rad_hf_tree_free(&tree);
    if (rc) rad_hub_fetch_free(out);
    return rc;
}

void rad_hub_fetch_free(RadHubFetch *f)
{
    if (!f) return;
    free(f->snapshot);
    free(f->gguf_path);
    f->snapshot = f->gguf_path = NULL;
}
