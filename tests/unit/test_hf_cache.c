/*
** test_hf_cache.c: the Hugging Face cache layout (app/models/hf_cache.c): name
** checks, where things go, listings (hostile ones refused), the saved
** listing format, links, refs, locks, partial downloads and purging.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../app/models/hf_cache.h"

static char tmpdir[256];
static RadHfCache cache;

#define SHA_A   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B   "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define GIT_C   "cccccccccccccccccccccccccccccccccccccccc"
#define COMMIT1 "1111111111111111111111111111111111111111"
#define COMMIT2 "2222222222222222222222222222222222222222"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int exists(const char *fmt, const char *a, const char *b)
{
    char p[1024];
    snprintf(p, sizeof p, fmt, a, b);
    struct stat st;
    return lstat(p, &st) == 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/radiance-hfcache-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char hub[300];
    snprintf(hub, sizeof hub, "%s/hub", tmpdir);
    setenv("HF_HOME", tmpdir, 1);
    setenv("HF_HUB_CACHE", hub, 1);
    return rad_hf_cache_init(&cache);
}

static int teardown(void **state)
{
    (void)state;
    rad_hf_cache_free(&cache);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ----------------------------------------------------------------- names */

static void test_names(void **state)
{
    (void)state;
    assert_true(rad_hf_repo_id_ok("Qwen/Qwen3-0.6B"));
    assert_true(rad_hf_repo_id_ok("meta-llama/Llama-3.2-1B-Instruct"));
    assert_true(rad_hf_repo_id_ok("gpt2"));
    static const char *const bad_repo[] = {"",     "/",     "a/",     "/a",     "a/b/c", "..",
                                           "a/..", "../a",  "a--b/c", "a/b..c", ".a/b",  "a/b.",
                                           "-a/b", "a b/c", "a/b\n",  "a\\b"};
    for (size_t i = 0; i < sizeof bad_repo / sizeof *bad_repo; i++)
        assert_false(rad_hf_repo_id_ok(bad_repo[i]));

    assert_true(rad_hf_revision_ok("main"));
    assert_true(rad_hf_revision_ok("refs/pr/1"));
    assert_true(rad_hf_revision_ok("v1.0+build"));
    assert_true(rad_hf_revision_ok(COMMIT1));
    static const char *const bad_rev[] = {"",     "/main", "main/", "a//b", "..",   "a/../b", ".hidden",
                                          "a/.b", "a b",   "a:b",   "a@b",  "a\\b", "~x"};
    for (size_t i = 0; i < sizeof bad_rev / sizeof *bad_rev; i++)
        assert_false(rad_hf_revision_ok(bad_rev[i]));

    assert_true(rad_hf_relpath_ok("config.json"));
    assert_true(rad_hf_relpath_ok("onnx/sub/model.onnx"));
    assert_true(rad_hf_relpath_ok("..hidden")); /* a name, not a parent */
    static const char *const bad_path[] = {"",    "/etc/passwd", "../x", "a/../../x", "a/..",
                                           "./a", "a/./b",       "a//b", "a/",        ".",
                                           "..",  "a\\..\\b",    "a\nb", "a\x7f"};
    for (size_t i = 0; i < sizeof bad_path / sizeof *bad_path; i++) {
        if (rad_hf_relpath_ok(bad_path[i])) print_error("'%s' accepted\n", bad_path[i]);
        assert_false(rad_hf_relpath_ok(bad_path[i]));
    }
    char deep[200] = "";
    for (int i = 0; i < 33; i++) strcat(deep, "d/");
    strcat(deep, "f");
    assert_false(rad_hf_relpath_ok(deep));

    assert_true(rad_hf_is_commit(COMMIT1));
    assert_false(rad_hf_is_commit("main"));
    assert_false(rad_hf_is_commit("111111111111111111111111111111111111111G"));
    assert_true(rad_hf_etag_ok(SHA_A) && rad_hf_etag_ok(GIT_C));
    assert_false(rad_hf_etag_ok("AAAA") || rad_hf_etag_ok("../../x"));
}

static void test_paths(void **state)
{
    (void)state;
    char expect[600];
    char *p = rad_hf_repo_dir(&cache, "Org/Name");
    snprintf(expect, sizeof expect, "%s/hub/models--Org--Name", tmpdir);
    assert_string_equal(p, expect);
    free(p);
    p = rad_hf_blob_path(&cache, "Org/Name", SHA_A, ".incomplete");
    snprintf(expect, sizeof expect, "%s/hub/models--Org--Name/blobs/%s.incomplete", tmpdir, SHA_A);
    assert_string_equal(p, expect);
    free(p);
    p = rad_hf_lock_path(&cache, "gpt2", SHA_A);
    snprintf(expect, sizeof expect, "%s/hub/.locks/models--gpt2/%s.lock", tmpdir, SHA_A);
    assert_string_equal(p, expect);
    free(p);
    p = rad_hf_tree_path(&cache, "Org/Name", COMMIT1);
    snprintf(expect, sizeof expect, "%s/hub/models--Org--Name/trees/%s.json", tmpdir, COMMIT1);
    assert_string_equal(p, expect);
    free(p);

    /* HF_HOME alone puts the hub cache under it; without either, HOME. */
    RadHfCache c;
    unsetenv("HF_HUB_CACHE");
    assert_int_equal(rad_hf_cache_init(&c), 0);
    snprintf(expect, sizeof expect, "%s/hub", tmpdir);
    assert_string_equal(c.hub, expect);
    rad_hf_cache_free(&c);
    unsetenv("HF_HOME");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    assert_int_equal(rad_hf_cache_init(&c), 0);
    assert_string_equal(c.hub, "/xdg/huggingface/hub");
    assert_string_equal(c.home, "/xdg/huggingface");
    rad_hf_cache_free(&c);
    unsetenv("XDG_CACHE_HOME");
    setenv("HF_HOME", tmpdir, 1);
    snprintf(expect, sizeof expect, "%s/hub", tmpdir);
    setenv("HF_HUB_CACHE", expect, 1);
}

/* -------------------------------------------------------------- listings */

static const char page[] =
    "[{\"type\":\"directory\",\"path\":\"onnx\",\"oid\":\"" GIT_C "\",\"size\":0},"
    " {\"type\":\"file\",\"path\":\"config.json\",\"size\":12,\"oid\":\"" GIT_C "\"},"
    " {\"type\":\"file\",\"path\":\"model.safetensors\",\"size\":133,\"oid\":\"" GIT_C "\","
    "  \"lfs\":{\"oid\":\"" SHA_A "\",\"size\":5000,\"pointerSize\":133}},"
    " {\"type\":\"file\",\"path\":\"onnx/model.onnx\",\"size\":7,\"oid\":\"" GIT_C "\"}]";

static void test_listing(void **state)
{
    (void)state;
    RadHfTree t;
    rad_hf_tree_init(&t);
    assert_int_equal(rad_hf_tree_add_page(&t, page, strlen(page), "org/x@1"), 0);
    assert_int_equal(t.n, 3); /* the directory is skipped */
    const RadHfFile *f = rad_hf_tree_find(&t, "model.safetensors");
    assert_non_null(f);
    assert_int_equal(f->size, 5000); /* the LFS object's size */
    assert_string_equal(rad_hf_file_etag(f), SHA_A);
    assert_string_equal(rad_hf_file_etag(rad_hf_tree_find(&t, "config.json")), GIT_C);

    /* Save and load: huggingface_hub's format_version 1, same content. */
    char path[400];
    snprintf(path, sizeof path, "%s/trees/x.json", cache.hub);
    assert_int_equal(rad_hf_tree_save(&cache, path, &t), 0);
    RadHfTree u;
    assert_int_equal(rad_hf_tree_load(&cache, path, &u), 0);
    assert_int_equal(u.n, 3);
    f = rad_hf_tree_find(&u, "model.safetensors");
    assert_non_null(f);
    assert_int_equal(f->size, 5000);
    assert_string_equal(f->sha256, SHA_A);
    assert_string_equal(f->blob_id, GIT_C);
    rad_hf_tree_free(&u);
    rad_hf_tree_free(&t);

    snprintf(path, sizeof path, "%s/trees/none.json", cache.hub);
    assert_int_equal(rad_hf_tree_load(&cache, path, &u), RAD_E_NOTFOUND);
    snprintf(path, sizeof path, "%s/trees/evil.json", cache.hub);
    write_file(path, "{\"format_version\":1,\"files\":{\"../../x\":{\"size\":1,\"blob_id\":\"" GIT_C "\"}}}");
    assert_int_equal(rad_hf_tree_load(&cache, path, &u), RAD_E_FORMAT);
    assert_int_equal(u.n, 0);
    write_file(path, "{\"format_version\":2,\"files\":{}}");
    assert_int_equal(rad_hf_tree_load(&cache, path, &u), RAD_E_FORMAT);
    /* a listing planted as a link is not read through it */
    char other[400];
    snprintf(other, sizeof other, "%s/outside.json", tmpdir);
    snprintf(path, sizeof path, "%s/trees/x.json", cache.hub);
    assert_int_equal(rename(path, other), 0);
    assert_int_equal(symlink(other, path), 0);
    assert_int_equal(rad_hf_tree_load(&cache, path, &u), RAD_E_IO);
    assert_non_null(strstr(rad_error_message(), "a symbolic link"));
}

/* A hostile or broken page refuses the whole listing, naming the problem. */
static void test_listing_refused(void **state)
{
    (void)state;
    static const struct {
        const char *json, *says;
    } bad[] = {
        {"[{\"type\":\"file\",\"path\":\"../../etc/passwd\",\"size\":1,\"oid\":\"" GIT_C "\"}]",
         "outside the cache"},
        {"[{\"type\":\"file\",\"path\":\"/etc/passwd\",\"size\":1,\"oid\":\"" GIT_C "\"}]",
         "outside the cache"},
        {"[{\"type\":\"file\",\"path\":\"a/../../b\",\"size\":1,\"oid\":\"" GIT_C "\"}]",
         "outside the cache"},
        {"[{\"type\":\"file\",\"size\":1,\"oid\":\"" GIT_C "\"}]", "outside the cache"},
        {"[{\"type\":\"file\",\"path\":\"a\",\"size\":-1,\"oid\":\"" GIT_C "\"}]", "negative size"},
        {"[{\"type\":\"file\",\"path\":\"a\",\"oid\":\"" GIT_C "\"}]", "no size"},
        {"[{\"type\":\"file\",\"path\":\"a\",\"size\":1,\"oid\":\"../x\"}]", "malformed git oid"},
        {"[{\"type\":\"file\",\"path\":\"a\",\"size\":1,\"oid\":\"" GIT_C
         "\",\"lfs\":{\"oid\":\"123\",\"size\":1}}]",
         "malformed LFS sha256"},
        {"[{\"type\":\"file\",\"path\":\"a\",\"size\":1,\"oid\":\"" GIT_C "\"},"
         "{\"type\":\"file\",\"path\":\"a\",\"size\":1,\"oid\":\"" GIT_C "\"}]",
         "listed twice"},
        {"{\"path\":\"a\"}", "not a JSON array"},
        {"[1]", "no 'type'"},
        {"[{", "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        RadHfTree t;
        rad_hf_tree_init(&t);
        int rc = rad_hf_tree_add_page(&t, bad[i].json, strlen(bad[i].json), "org/x@1");
        if (rc != RAD_E_FORMAT || !strstr(rad_error_message(), bad[i].says))
            print_error("case %zu: %d '%s'\n", i, rc, rad_error_message());
        assert_int_equal(rc, RAD_E_FORMAT);
        assert_non_null(strstr(rad_error_message(), "org/x@1"));
        rad_hf_tree_free(&t);
    }
}

/* ------------------------------------------------- links, refs and locks */

static void put_blob(const char *repo, const char *etag, const char *text)
{
    char *p = rad_hf_blob_path(&cache, repo, etag, "");
    char *dir = rad_hf_blob_path(&cache, repo, "", "");
    assert_int_equal(rad_hf_mkdirs(dir), 0);
    write_file(p, text);
    free(p);
    free(dir);
}

static void test_links_refs_locks(void **state)
{
    (void)state;
    const char *repo = "org/links";
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT1, "x.json", SHA_B), RAD_E_NOTFOUND); /* no blob */
    put_blob(repo, SHA_A, "hello");
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT1, "a/b/weights.bin", SHA_A), 0);
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT1, "top.bin", SHA_A), 0);
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT1, "top.bin", SHA_A), 0); /* replace */
    char *snap = rad_hf_snapshot_dir(&cache, repo, COMMIT1), link[600], target[300];
    snprintf(link, sizeof link, "%s/a/b/weights.bin", snap);
    ssize_t n = readlink(link, target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = 0;
    assert_string_equal(target, "../../../../blobs/" SHA_A); /* relative */
    snprintf(link, sizeof link, "%s/top.bin", snap);
    n = readlink(link, target, sizeof target - 1);
    target[n] = 0;
    assert_string_equal(target, "../../blobs/" SHA_A);

    RadHfFile f = {.path = "a/b/weights.bin", .size = 5};
    assert_int_equal(rad_hf_snapshot_has(&cache, repo, COMMIT1, &f), 1);
    f.size = 6;
    assert_int_equal(rad_hf_snapshot_has(&cache, repo, COMMIT1, &f), 0);
    f.path = "nope";
    f.size = -1;
    assert_int_equal(rad_hf_snapshot_has(&cache, repo, COMMIT1, &f), 0);

    RadHfTree t;
    assert_int_equal(rad_hf_tree_from_snapshot(&cache, snap, &t), 0);
    assert_int_equal(t.n, 2);
    const RadHfFile *g = rad_hf_tree_find(&t, "a/b/weights.bin");
    assert_non_null(g);
    assert_int_equal(g->size, 5);
    assert_string_equal(g->sha256, SHA_A);
    rad_hf_tree_free(&t);

    /* A link that leads out of the repository's blobs is refused by name,
    ** by snapshot_has and by the listing made from the snapshot. */
    snprintf(link, sizeof link, "%s/evil.bin", snap);
    assert_int_equal(symlink("/etc/passwd", link), 0);
    RadHfFile evil = {.path = "evil.bin", .size = -1};
    assert_int_equal(rad_hf_snapshot_has(&cache, repo, COMMIT1, &evil), RAD_E_IO);
    assert_non_null(strstr(rad_error_message(), "evil.bin: a link to '/etc/passwd'"));
    assert_int_equal(rad_hf_tree_from_snapshot(&cache, snap, &t), RAD_E_IO);
    assert_int_equal(unlink(link), 0);
    free(snap);

    char commit[41];
    assert_int_equal(rad_hf_ref_read(&cache, repo, "main", commit), RAD_E_NOTFOUND);
    assert_int_equal(rad_hf_ref_write(&cache, repo, "main", COMMIT1), 0);
    assert_int_equal(rad_hf_ref_write(&cache, repo, "refs/pr/1", COMMIT2), 0);
    assert_int_equal(rad_hf_ref_read(&cache, repo, "main", commit), 0);
    assert_string_equal(commit, COMMIT1);
    assert_int_equal(rad_hf_ref_read(&cache, repo, "refs/pr/1", commit), 0);
    assert_string_equal(commit, COMMIT2);

    char *lock = rad_hf_lock_path(&cache, repo, SHA_A);
    int fd1, fd2;
    assert_int_equal(rad_hf_lock(&cache, lock, 0, &fd1), 0);
    assert_int_equal(rad_hf_lock(&cache, lock, 0, &fd2), RAD_E_STATE); /* a second holder is turned away */
    assert_int_equal(fd2, -1);
    rad_hf_unlock(fd1);
    assert_int_equal(rad_hf_lock(&cache, lock, 0, &fd2), 0);
    rad_hf_unlock(fd2);
    free(lock);
}

/* ------------------------------------------------- partials and purging */

static void test_partials_and_purge(void **state)
{
    (void)state;
    const char *repo = "org/purge";
    char *hub = cache.hub, *tree_path;
    /* Two commits share blob A; commit 1 alone has B, commit 2 alone has C. */
    put_blob(repo, SHA_A, "shared");
    put_blob(repo, SHA_B, "only in one");
    put_blob(repo, GIT_C, "only in two");
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT1, "model.safetensors", SHA_A), 0);
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT1, "sub/extra.bin", SHA_B), 0);
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT2, "model.safetensors", SHA_A), 0);
    assert_int_equal(rad_hf_link(&cache, repo, COMMIT2, "config.json", GIT_C), 0);
    assert_int_equal(rad_hf_ref_write(&cache, repo, "main", COMMIT1), 0);
    assert_int_equal(rad_hf_ref_write(&cache, repo, "v2", COMMIT2), 0);

    /* A partial download, named through the saved listing. */
    RadHfTree t;
    rad_hf_tree_init(&t);
    static const char listing[] =
        "[{\"type\":\"file\",\"path\":\"big.safetensors\",\"size\":9,\"oid\":\"" GIT_C
        "\",\"lfs\":{\"oid\":\"dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\","
        "\"size\":100}}]";
    assert_int_equal(rad_hf_tree_add_page(&t, listing, strlen(listing), "x"), 0);
    tree_path = rad_hf_tree_path(&cache, repo, COMMIT2);
    assert_int_equal(rad_hf_tree_save(&cache, tree_path, &t), 0);
    rad_hf_tree_free(&t);
    char *part = rad_hf_blob_path(
        &cache, repo, "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd", ".incomplete");
    write_file(part, "0123456789");
    RadHfPartial *p;
    int np;
    assert_int_equal(rad_hf_scan_partials(&cache, &p, &np), 0);
    assert_int_equal(np, 1);
    assert_string_equal(p[0].repo, repo);
    assert_string_equal(p[0].path, "big.safetensors");
    assert_int_equal(p[0].bytes, 10);
    assert_int_equal(p[0].size, 100);
    rad_hf_partials_free(p, np);

    uint64_t freed = 0;
    assert_int_equal(rad_hf_purge(&cache, repo, COMMIT1, &freed), 0);
    assert_int_equal(freed, strlen("only in one")); /* B went; A is still linked from commit 2 */
    assert_false(exists("%s/models--org--purge/snapshots/%s", hub, COMMIT1));
    assert_false(exists("%s/models--org--purge/blobs/%s", hub, SHA_B));
    assert_true(exists("%s/models--org--purge/blobs/%s", hub, SHA_A));
    assert_false(exists("%s/models--org--purge/refs/main%s", hub, ""));
    assert_true(exists("%s/models--org--purge/refs/v2%s", hub, ""));
    assert_true(exists("%s", part, "")); /* a snapshot is left: the partial stays */
    assert_int_equal(rad_hf_purge(&cache, repo, COMMIT1, NULL), RAD_E_NOTFOUND);

    assert_int_equal(rad_hf_purge(&cache, repo, COMMIT2, &freed), 0);
    assert_false(exists("%s/models--org--purge%s", hub, "")); /* nothing left of the repo */
    assert_false(exists("%s/.locks/models--org--purge%s", hub, ""));
    assert_int_equal(rad_hf_scan_partials(&cache, &p, &np), 0);
    for (int i = 0; i < np; i++) assert_string_not_equal(p[i].repo, repo);
    rad_hf_partials_free(p, np);
    free(part);
    free(tree_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_listing),
        cmocka_unit_test(test_listing_refused),
        cmocka_unit_test(test_links_refs_locks),
        cmocka_unit_test(test_partials_and_purge),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
