/*
** test_model_spec.c: model specs (app/models/model_spec.c): hf:ORG/REPO[@REV][:QUANT],
** hf.co/ORG/REPO and the other spellings, aliases from TSV files, local
** paths known by content, the names refused, and the choice of files from
** a repository listing (safetensors, shards, GGUF quants, the defaults, the
** ambiguous and the missing, split parts).
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

#include "../../app/models/model_spec.h"

static char tmpdir[256];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/radiance-spec-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int parse(const char *text, RadModelSpec *s)
{
    return rad_model_spec_parse_in(text, NULL, 0, s);
}

/* ------------------------------------------------------------ hf: specs */

static void test_hf_specs(void **state)
{
    (void)state;
    RadModelSpec *s = malloc(sizeof *s);
    assert_int_equal(parse("hf:Qwen/Qwen3-0.6B", s), 0);
    assert_int_equal(s->kind, RAD_SPEC_HUB);
    assert_string_equal(s->repo, "Qwen/Qwen3-0.6B");
    assert_string_equal(s->revision, "main");
    assert_string_equal(s->quant, "");
    assert_int_equal(s->quant_from_spec, 0);
    assert_string_equal(s->name, "hf:Qwen/Qwen3-0.6B");

    assert_int_equal(parse("hf:Org/Repo@v1.0:q8_0", s), 0);
    assert_string_equal(s->revision, "v1.0");
    assert_string_equal(s->quant, "q8_0");
    assert_int_equal(s->quant_from_spec, 1);
    assert_string_equal(s->name, "hf:Org/Repo@v1.0"); /* the quant is not part of the name */

    assert_int_equal(parse("hf:Org/Repo@refs/pr/1", s), 0);
    assert_string_equal(s->revision, "refs/pr/1");
    assert_int_equal(parse("hf:gpt2:Q4_K_M", s), 0); /* a repo without an organisation */
    assert_string_equal(s->repo, "gpt2");
    assert_string_equal(s->quant, "Q4_K_M");
    free(s);
}

/* Every part that could climb out of the cache or break a URL is refused. */
static void test_hf_specs_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "hf:",         "hf:../x",   "hf:a/..",     "hf:a/../b",      "hf:a/b/c",    "hf:/abs",
        "hf:a--b/c",   "hf:a/b--c", "hf:.a/b",     "hf:a/b@",        "hf:a/b@../x", "hf:a/b@x/../y",
        "hf:a/b@/x",   "hf:a/b@x/", "hf:a/b@x//y", "hf:a/b@.hidden", "hf:a/b:",     "hf:a/b:q8/0",
        "hf:a/b:q8.0", "hf:a b/c",  "hf:a/b@x y",  "hf:a/b@x%2F",
    };
    RadModelSpec *s = malloc(sizeof *s);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = parse(bad[i], s);
        if (rc != RAD_E_ARG) print_error("'%s' gave %d\n", bad[i], rc);
        assert_int_equal(rc, RAD_E_ARG);
        assert_true(strlen(rad_error_message()) > 0);
    }
    free(s);
}

/* -------------------------------------------------------------- aliases */

static void test_aliases(void **state)
{
    (void)state;
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a.tsv", tmpdir);
    snprintf(b, sizeof b, "%s/b.tsv", tmpdir);
    write_file(a, "# alias\trepo\trev\tquant\tlicence\n"
                  "\n"
                  "tiny\ttest/tiny\t\tmain\tf32\tsome licence, with\ttabs\n"
                  "gg\ttest/gguf\tv1\tsub/model-Q8_0.gguf\tx\n"
                  "bad\t../x\tmain\tf32\n"
                  "badfile\ttest/x\tmain\t../up.gguf\n");
    write_file(b, "tiny\tother/repo\tmain\tbf16\tshadowed\n"
                  "only-b\ttest/b\tdeadbeef\tq8_0\n");
    const char *files[] = {a, b, "/nonexistent/models.tsv"};
    RadModelSpec *s = malloc(sizeof *s);

    assert_int_equal(rad_model_spec_parse_in("tiny", files, 3, s), 0);
    assert_int_equal(s->kind, RAD_SPEC_HUB);
    assert_string_equal(s->name, "tiny");
    assert_string_equal(s->repo, "test/tiny"); /* the first file wins */
    assert_string_equal(s->revision, "main");
    assert_string_equal(s->quant, "f32");
    assert_int_equal(s->quant_from_spec, 0);
    assert_string_equal(s->licence, "some licence, with\ttabs");

    assert_int_equal(rad_model_spec_parse_in("tiny:q8_0", files, 3, s), 0);
    assert_string_equal(s->name, "tiny");
    assert_string_equal(s->quant, "q8_0");
    assert_int_equal(s->quant_from_spec, 1);

    assert_int_equal(rad_model_spec_parse_in("gg", files, 3, s), 0);
    assert_string_equal(s->file, "sub/model-Q8_0.gguf");
    assert_string_equal(s->revision, "v1");
    assert_string_equal(s->quant, "");

    assert_int_equal(rad_model_spec_parse_in("only-b", files, 3, s), 0);
    assert_string_equal(s->repo, "test/b");

    assert_int_equal(rad_model_spec_parse_in("bad", files, 3, s), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "a.tsv:5"));
    assert_int_equal(rad_model_spec_parse_in("badfile", files, 3, s), RAD_E_FORMAT);
    assert_int_equal(rad_model_spec_parse_in("nosuch", files, 3, s), RAD_E_NOTFOUND);
    assert_non_null(strstr(rad_error_message(), "unknown model 'nosuch'"));
    assert_int_equal(rad_model_spec_parse_in("a..b", files, 3, s), RAD_E_ARG);
    free(s);
}

/* ---------------------------------------------------------------- paths */

static void test_paths(void **state)
{
    (void)state;
    char p[400], dir[300];
    RadModelSpec *s = malloc(sizeof *s);
    snprintf(p, sizeof p, "%s/m.rad", tmpdir);
    write_file(p, "RADM....");
    assert_int_equal(parse(p, s), 0);
    assert_int_equal(s->kind, RAD_SPEC_RAD);
    assert_string_equal(s->path, p);
    assert_string_equal(s->name, p);

    snprintf(p, sizeof p, "%s/m.gguf", tmpdir);
    write_file(p, "GGUF");
    assert_int_equal(parse(p, s), 0);
    assert_int_equal(s->kind, RAD_SPEC_GGUF);
    snprintf(p, sizeof p, "%s/weights.bin", tmpdir);
    write_file(p, "GGUF....");
    assert_int_equal(parse(p, s), 0);
    assert_int_equal(s->kind, RAD_SPEC_GGUF); /* known by its magic */

    snprintf(dir, sizeof dir, "%s/folder", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(parse(dir, s), 0);
    assert_int_equal(s->kind, RAD_SPEC_HF_DIR);

    /* relative paths become absolute */
    char cwd[300];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);
    assert_int_equal(parse("./folder", s), 0);
    assert_string_equal(s->path, dir);
    assert_int_equal(parse("folder", s), 0); /* not an alias, but a folder here */
    assert_int_equal(s->kind, RAD_SPEC_HF_DIR);
    assert_int_equal(chdir(cwd), 0);

    snprintf(p, sizeof p, "%s/missing.rad", tmpdir);
    assert_int_equal(parse(p, s), RAD_E_NOTFOUND);
    assert_int_equal(parse("", s), RAD_E_ARG);
    assert_true(rad_model_quant_ok("Q4_K_M") && rad_model_quant_ok("bf16"));
    assert_false(rad_model_quant_ok("") || rad_model_quant_ok("q4/k") || rad_model_quant_ok("a.b"));
    free(s);
}

/* ----------------------------------------------------------- choosing */

/* A listing from paths; "name:L" makes an LFS entry. */
static void listing(RadHfTree *t, const char *const *paths, int n)
{
    char json[16384];
    size_t used = (size_t)snprintf(json, sizeof json, "[");
    for (int i = 0; i < n; i++) {
        int lfs = strstr(paths[i], ".safetensors") || strstr(paths[i], ".gguf");
        used += (size_t)snprintf(
            json + used, sizeof json - used,
            "%s{\"type\":\"file\",\"path\":\"%s\",\"size\":%d,\"oid\":\"%040d\"%s}", i ? "," : "", paths[i],
            100 + i, i,
            lfs ? ",\"lfs\":{\"oid\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
                  "\"size\":5000,\"pointerSize\":130}"
                : "");
    }
    snprintf(json + used, sizeof json - used, "]");
    rad_hf_tree_init(t);
    assert_int_equal(rad_hf_tree_add_page(t, json, strlen(json), "test"), 0);
}

/* The selected paths, comma-joined, in listing order. */
static const char *chosen(const RadHfTree *t, const RadSelection *s)
{
    static char buf[2048];
    buf[0] = 0;
    for (int i = 0; i < s->n; i++) {
        if (i) strcat(buf, ",");
        strcat(buf, t->files[s->idx[i]].path);
    }
    return buf;
}

static void test_select_safetensors(void **state)
{
    (void)state;
    RadHfTree t;
    RadSelection s;
    static const char *const single[] = {
        ".gitattributes",
        "README.md",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "onnx/model.onnx",
        "original/consolidated.safetensors",
        "generation_config.json",
        "merges.txt",
    };
    listing(&t, single, 10);
    assert_int_equal(rad_model_select(&t, NULL, NULL, "t", &s), 0);
    assert_int_equal(s.kind, RAD_REPO_SAFETENSORS);
    assert_string_equal(
        chosen(&t, &s),
        "config.json,model.safetensors,tokenizer.json,tokenizer_config.json,generation_config.json,"
        "merges.txt");
    rad_selection_free(&s);
    rad_hf_tree_free(&t);

    static const char *const sharded[] = {
        "config.json",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "consolidated.safetensors",
        "sub/model-00001-of-00002.safetensors",
    };
    listing(&t, sharded, 6);
    assert_int_equal(rad_model_select(&t, "bf16", NULL, "t", &s), 0);
    assert_string_equal(chosen(&t, &s),
                        "config.json,model.safetensors.index.json,model-00001-of-00002.safetensors,"
                        "model-00002-of-00002.safetensors");
    rad_selection_free(&s);
    rad_hf_tree_free(&t);

    static const char *const noweights[] = {"config.json", "pytorch_model.bin", "sub/model.safetensors"};
    listing(&t, noweights, 3);
    assert_int_equal(rad_model_select(&t, NULL, NULL, "org/x@abc", &s), RAD_E_NOTFOUND);
    assert_non_null(strstr(rad_error_message(), "org/x@abc"));
    rad_hf_tree_free(&t);

    static const char *const nothing[] = {"README.md", "data.csv"};
    listing(&t, nothing, 2);
    assert_int_equal(rad_model_select(&t, NULL, NULL, "t", &s), RAD_E_UNSUPPORTED);
    rad_hf_tree_free(&t);
}

static void test_select_gguf(void **state)
{
    (void)state;
    RadHfTree t;
    RadSelection s;
    static const char *const files[] = {
        "README.md",
        "sub/a-Q4_K_M.gguf",
        "a-Q4_K_M.gguf",
        "a-Q4_K.gguf",
        "a-Q8_0.gguf",
        "mmproj-Q4_K_M.gguf",
        "a-IQ4_XS.gguf",
        "b-Q5_K_M-00002-of-00003.gguf",
        "b-Q5_K_M-00001-of-00003.gguf",
        "b-Q5_K_M-00003-of-00003.gguf",
        "c-Q6_K-00001-of-00002.gguf",
    };
    listing(&t, files, 11);

    assert_int_equal(rad_model_select(&t, NULL, NULL, "t", &s), 0); /* Q4_K_M by default, top level first */
    assert_int_equal(s.kind, RAD_REPO_GGUF);
    assert_string_equal(chosen(&t, &s), "a-Q4_K_M.gguf");
    assert_string_equal(t.files[s.first].path, "a-Q4_K_M.gguf");
    assert_string_equal(s.quant, "Q4_K_M");
    rad_selection_free(&s);

    assert_int_equal(rad_model_select(&t, "q8_0", NULL, "t", &s), 0); /* case does not matter */
    assert_string_equal(chosen(&t, &s), "a-Q8_0.gguf");
    rad_selection_free(&s);
    assert_int_equal(rad_model_select(&t, "Q4_K", NULL, "t", &s), 0); /* a whole token: not Q4_K_M */
    assert_string_equal(chosen(&t, &s), "a-Q4_K.gguf");
    rad_selection_free(&s);
    assert_int_equal(rad_model_select(&t, "Q5_K_M", NULL, "t", &s), 0);
    assert_string_equal(chosen(&t, &s), "b-Q5_K_M-00002-of-00003.gguf,b-Q5_K_M-00001-of-00003.gguf,"
                                        "b-Q5_K_M-00003-of-00003.gguf");
    assert_string_equal(t.files[s.first].path, "b-Q5_K_M-00001-of-00003.gguf");
    rad_selection_free(&s);
    assert_int_equal(rad_model_select(&t, NULL, "sub/a-Q4_K_M.gguf", "t", &s), 0);
    assert_string_equal(chosen(&t, &s), "sub/a-Q4_K_M.gguf");
    rad_selection_free(&s);

    assert_int_equal(rad_model_select(&t, "Q4_XS", NULL, "org/x@abc", &s),
                     RAD_E_NOTFOUND); /* IQ4_XS is another quant */
    /* the quants there are, by name, and the spelling that picks one */
    assert_non_null(strstr(rad_error_message(), "the quants here: IQ4_XS, Q4_K, Q4_K_M, Q5_K_M, Q6_K, Q8_0"));
    assert_non_null(strstr(rad_error_message(), "hf:org/x:QUANT"));
    assert_null(strstr(rad_error_message(), "mmproj"));
    assert_int_equal(rad_model_select(&t, "Q6_K", NULL, "t", &s), RAD_E_NOTFOUND); /* a part is missing */
    assert_non_null(strstr(rad_error_message(), "split in 2 parts but 1 are listed"));
    assert_int_equal(rad_model_select(&t, "mmproj", NULL, "t", &s), RAD_E_NOTFOUND);
    assert_int_equal(rad_model_select(&t, NULL, "b-Q5_K_M-00002-of-00003.gguf", "t", &s), RAD_E_NOTFOUND);
    assert_non_null(strstr(rad_error_message(), "named by its part 1"));
    rad_hf_tree_free(&t);

    /* No Q4_K_M: Q8_0 (llama.cpp's second choice); neither: the only model,
    ** else a refusal that lists the quants. */
    static const char *const q8[] = {"m-Q2_K.gguf", "m-Q8_0.gguf", "mmproj-m-F16.gguf", "m.imatrix.gguf"};
    listing(&t, q8, 4);
    assert_int_equal(rad_model_select(&t, NULL, NULL, "t", &s), 0);
    assert_string_equal(chosen(&t, &s), "m-Q8_0.gguf");
    assert_string_equal(s.quant, "Q8_0");
    rad_selection_free(&s);
    rad_hf_tree_free(&t);
    static const char *const one[] = {"README.md", "only-IQ3_XXS.gguf", "mmproj-only-F16.gguf"};
    listing(&t, one, 3);
    assert_int_equal(rad_model_select(&t, NULL, NULL, "t", &s), 0);
    assert_string_equal(chosen(&t, &s), "only-IQ3_XXS.gguf");
    assert_string_equal(s.quant, "IQ3_XXS");
    rad_selection_free(&s);
    rad_hf_tree_free(&t);
    static const char *const many[] = {"m-Q2_K.gguf", "m-Q3_K_S.gguf", "a/m-Q5_K_M.gguf", "b/m-Q5_K_M.gguf"};
    listing(&t, many, 4);
    assert_int_equal(rad_model_select(&t, NULL, NULL, "org/m@abc", &s), RAD_E_NOTFOUND);
    assert_non_null(strstr(rad_error_message(), "several GGUF models and none is Q4_K_M or Q8_0"));
    assert_non_null(strstr(rad_error_message(), "Q2_K, Q3_K_S, Q5_K_M"));
    assert_int_equal(rad_model_select(&t, "q5_k_m", NULL, "org/m@abc", &s), RAD_E_NOTFOUND);
    assert_non_null(strstr(rad_error_message(), "matches several files: a/m-Q5_K_M.gguf, b/m-Q5_K_M.gguf"));
    assert_non_null(strstr(rad_error_message(), "hf:org/m:a/m-Q5_K_M.gguf"));
    assert_int_equal(rad_model_select(&t, NULL, "b/m-Q5_K_M.gguf", "t", &s), 0); /* a file settles it */
    assert_string_equal(s.quant, "Q5_K_M");
    rad_selection_free(&s);
    rad_hf_tree_free(&t);

    char tag[32];
    rad_model_gguf_tag("sub/Qwen3-0.6B-Q8_0.gguf", tag, sizeof tag);
    assert_string_equal(tag, "Q8_0");
    rad_model_gguf_tag("x.q4_k_m-00001-of-00002.gguf", tag, sizeof tag);
    assert_string_equal(tag, "Q4_K_M");
    rad_model_gguf_tag("plain.gguf", tag, sizeof tag);
    assert_string_equal(tag, "PLAIN");
}

/* The spellings people bring: hf.co/ and huggingface.co/ (ollama's), a
** GGUF file as the quant, a bare ORG/REPO (refused with the hub spelling as
** the hint); a local file by its content, keeping a symlink's own name; a
** FIFO refused before anything opens it. */
static void test_spellings(void **state)
{
    (void)state;
    RadModelSpec *s = malloc(sizeof *s);
    assert_int_equal(parse("hf.co/bartowski/Model-GGUF:Q4_K_M", s), 0);
    assert_int_equal(s->kind, RAD_SPEC_HUB);
    assert_string_equal(s->repo, "bartowski/Model-GGUF");
    assert_string_equal(s->quant, "Q4_K_M");
    assert_string_equal(s->name, "hf:bartowski/Model-GGUF"); /* one model, however it was spelt */
    assert_int_equal(parse("https://huggingface.co/Org/Repo@v2", s), 0);
    assert_string_equal(s->repo, "Org/Repo");
    assert_string_equal(s->revision, "v2");
    assert_int_equal(parse("hf:Org/Repo:sub/model-Q8_0.gguf", s), 0);
    assert_string_equal(s->file, "sub/model-Q8_0.gguf");
    assert_string_equal(s->quant, "");
    assert_int_equal(s->quant_from_spec, 1);
    assert_int_equal(parse("hf:Org/Repo:../x.gguf", s), RAD_E_ARG);

    assert_int_equal(parse("Qwen/Qwen3-0.6B", s), RAD_E_NOTFOUND);
    assert_non_null(strstr(rad_error_message(), "Qwen/Qwen3-0.6B: no such file or folder"));
    assert_non_null(strstr(rad_error_message(), "hf:Qwen/Qwen3-0.6B"));
    assert_int_equal(parse("./Qwen/Qwen3-0.6B", s), RAD_E_NOTFOUND); /* a path: no hint */
    assert_null(strstr(rad_error_message(), "hf:"));

    char blob[400], link[400], fifo[400];
    snprintf(blob, sizeof blob, "%s/sha256-0123abcd", tmpdir);
    write_file(blob, "GGUF\3\0\0\0");
    assert_int_equal(parse(blob, s), 0);
    assert_int_equal(s->kind, RAD_SPEC_GGUF); /* known by its bytes */
    snprintf(link, sizeof link, "%s/model-00001-of-00002.gguf", tmpdir);
    assert_int_equal(symlink(blob, link), 0);
    assert_int_equal(parse(link, s), 0);
    assert_string_equal(s->path, link); /* the link's name, which finds the other parts */
    snprintf(fifo, sizeof fifo, "%s/x.gguf", tmpdir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(parse(fifo, s), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "not a regular file"));
    free(s);
}

/* RADIANCE_ALIASES is the first alias file; an XDG_CONFIG_HOME that is not
** absolute is ignored (the XDG specification). */
static void test_alias_files(void **state)
{
    (void)state;
    char *files[6];
    setenv("RADIANCE_ALIASES", "/x/aliases.tsv", 1);
    setenv("XDG_CONFIG_HOME", "relative/config", 1);
    setenv("HOME", "/home/someone", 1);
    int n = rad_model_alias_files(files, 6);
    assert_true(n >= 2);
    assert_string_equal(files[0], "/x/aliases.tsv");
    assert_string_equal(files[1], "/home/someone/.config/radiance/models.tsv");
    for (int i = 0; i < n; i++) free(files[i]);
    setenv("XDG_CONFIG_HOME", "/etc/xdg-config", 1);
    n = rad_model_alias_files(files, 6);
    assert_string_equal(files[1], "/etc/xdg-config/radiance/models.tsv");
    for (int i = 0; i < n; i++) free(files[i]);
    unsetenv("RADIANCE_ALIASES");
    unsetenv("XDG_CONFIG_HOME");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_specs),
        cmocka_unit_test(test_hf_specs_refused),
        cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_select_safetensors),
        cmocka_unit_test(test_select_gguf),
        cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_alias_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
