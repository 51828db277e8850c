/*
** test_ref_rope.h: rope's semantics, part of test_ref.c.
**
** Pins both pair layouts on a vector small enough to rotate by hand, the
** identity at position 0, partial rotary, the two scalings (by comparing
** against unscaled rotations at scaled positions, which must agree bit for
** bit), YaRN against a direct computation of its formulas in double and
** against two rotations transformers computed (a Qwen3 long-context config,
** a gpt-oss one), and one llama3 rotation computed by transformers.
*/

typedef struct RopeCfg {
    int64_t n_head, head_dim, n_rot, mode;
    double theta;
    int64_t scaling;
    double factor, low, high;
    int64_t orig;
    const float *freq_factors;      /* scaling FACTORS: n_rot / 2, or NULL */
    int64_t n_factors;
    double beta_fast, beta_slow, attn_factor;  /* scaling YARN */
    int64_t truncate;
} RopeCfg;

/* Rotate M rows of x in place at the given positions. */
static int rope(const RopeCfg *r, float *x, int32_t *pos, int64_t M)
{
    Call c = call_new("rope", M);
    set_i(&c, "n_head", r->n_head);
    set_i(&c, "head_dim", r->head_dim);
    set_i(&c, "n_rot", r->n_rot);
    set_i(&c, "mode", r->mode);
    set_f(&c, "theta", r->theta);
    set_i(&c, "scaling", r->scaling);
    set_f(&c, "factor", r->factor);
    set_f(&c, "low_freq_factor", r->low);
    set_f(&c, "high_freq_factor", r->high);
    set_i(&c, "orig_ctx", r->orig);
    set_f(&c, "beta_fast", r->beta_fast);
    set_f(&c, "beta_slow", r->beta_slow);
    set_f(&c, "attn_factor", r->attn_factor);
    set_i(&c, "truncate", r->truncate);
    set_act(&c, "x", x, M, r->n_head * r->head_dim);
    set_index(&c, "positions", pos, M);
    if (r->freq_factors) set_weight(&c, "freq_factors", r->freq_factors, RAD_ENC_F32, 0, r->n_factors, 0);
    return run(&c);
}

/* Position 0 is the identity, in both layouts. */
static void test_rope_position_zero(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        RopeCfg r = {2, 8, 8, mode, 10000, 0, 1, 1, 4, 8192};
        float x[16], y[16];
        int32_t pos = 0;
        fill(x, 16, 6);
        memcpy(y, x, sizeof y);
        assert_int_equal(rope(&r, y, &pos, 1), RAD_OK);
        assert_memory_equal(x, y, sizeof x);
    }
}

/* NEOX pairs (i, i + n_rot/2); adjacent pairs (2i, 2i + 1); pair i turns by
** pos * theta^(-2i/n_rot): at theta 10^4, head_dim 4, pos 1 the angles are
** 1 and 0.01 rad. */
static void test_rope_layouts(void **state)
{
    (void)state;
    double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
    int32_t pos = 1;

    RopeCfg neox = {1, 4, 4, RAD_ROPE_MODE_NEOX, 10000, 0, 1, 1, 4, 8192};
    float x[4] = {1, 2, 3, 4};
    assert_int_equal(rope(&neox, x, &pos, 1), RAD_OK);
    assert_close(x[0], 1 * c1 - 3 * s1, 1e-6);
    assert_close(x[2], 3 * c1 + 1 * s1, 1e-6);
    assert_close(x[1], 2 * c2 - 4 * s2, 1e-6);
    assert_close(x[3], 4 * c2 + 2 * s2, 1e-6);

    RopeCfg adj = {1, 4, 4, RAD_ROPE_MODE_ADJACENT, 10000, 0, 1, 1, 4, 8192};
    float y[4] = {1, 2, 3, 4};
    assert_int_equal(rope(&adj, y, &pos, 1), RAD_OK);
    assert_close(y[0], 1 * c1 - 2 * s1, 1e-6);
    assert_close(y[1], 2 * c1 + 1 * s1, 1e-6);
    assert_close(y[2], 3 * c2 - 4 * s2, 1e-6);
    assert_close(y[3], 4 * c2 + 3 * s2, 1e-6);

    neox.mode = 2;
    assert_int_equal(rope(&neox, x, &pos, 1), RAD_E_UNSUPPORTED);
}

/* Partial rotary: dims past n_rot pass through; every head turns alike;
** each row uses its own position. */
static void test_rope_partial_heads(void **state)
{
    (void)state;
    RopeCfg r = {2, 6, 4, RAD_ROPE_MODE_NEOX, 10000, 0, 1, 1, 4, 8192};
    float x[2][12], orig[2][12];
    int32_t pos[2] = {5, 9};
    fill(x[0], 6, 7);
    for (int i = 0; i < 6; i++) x[0][6 + i] = x[0][i]; /* head 1 = head 0 */
    fill(x[1], 12, 8);
    memcpy(orig, x, sizeof x);
    assert_int_equal(rope(&r, &x[0][0], pos, 2), RAD_OK);
    assert_memory_equal(x[0], x[0] + 6, 6 * sizeof(float));
    for (int h = 0; h < 2; h++) {
        assert_true(x[1][6 * h + 4] == orig[1][6 * h + 4]);
        assert_true(x[1][6 * h + 5] == orig[1][6 * h + 5]);
    }
    float y[6];
    int32_t p9 = 9;
    memcpy(y, orig[1], sizeof y);
    assert_int_equal(rope(&(RopeCfg){1, 6, 4, 0, 10000, 0, 1, 1, 4, 8192}, y, &p9, 1), RAD_OK);
    assert_memory_equal(y, x[1], sizeof y);
}

/* Linear scaling by 4 at position 400 is the unscaled rotation at 100;
** llama3 scaling keeps the high frequencies, divides the low ones by factor
** (position 8000 scaled = 1000 unscaled there) and blends in between. */
static void test_rope_scaling(void **state)
{
    (void)state;
    enum { HD = 128 };
    RopeCfg none = {1, HD, HD, RAD_ROPE_MODE_ADJACENT, 500000, 0, 1, 1, 4, 8192};
    RopeCfg lin = none, l3 = none;
    lin.scaling = RAD_ROPE_SCALING_LINEAR;
    lin.factor = 4;
    l3.scaling = RAD_ROPE_SCALING_LLAMA3;
    l3.factor = 8;
    float base[HD], a[HD], b[HD], hi[HD], lo[HD];
    int32_t p400 = 400, p100 = 100, p8000 = 8000, p1000 = 1000;
    for (int i = 0; i < HD; i++) base[i] = 1.0f;

    memcpy(a, base, sizeof a);
    memcpy(b, base, sizeof b);
    assert_int_equal(rope(&lin, a, &p400, 1), RAD_OK);
    assert_int_equal(rope(&none, b, &p100, 1), RAD_OK);
    assert_memory_equal(a, b, sizeof a);

    memcpy(a, base, sizeof a);
    memcpy(hi, base, sizeof hi);
    memcpy(lo, base, sizeof lo);
    assert_int_equal(rope(&l3, a, &p8000, 1), RAD_OK);
    assert_int_equal(rope(&none, hi, &p8000, 1), RAD_OK);
    assert_int_equal(rope(&none, lo, &p1000, 1), RAD_OK);
    int n_high = 0, n_low = 0, n_mid = 0;
    for (int i = 0; i < HD / 2; i++) {
        double wavelen = 2 * 3.14159265358979 * pow(500000.0, 2.0 * i / HD);
        const float *pa = a + 2 * i;
        if (wavelen < 2048 * 0.99) { /* high frequency: untouched */
            assert_memory_equal(pa, hi + 2 * i, 2 * sizeof(float));
            n_high++;
        } else if (wavelen > 8192 * 1.01) { /* low frequency: divided by 8 */
            assert_memory_equal(pa, lo + 2 * i, 2 * sizeof(float));
            n_low++;
        } else if (wavelen > 2048 * 1.01 && wavelen < 8192 * 0.99) {
            assert_true(memcmp(pa, hi + 2 * i, 8) != 0 && memcmp(pa, lo + 2 * i, 8) != 0);
            n_mid++;
        }
    }
    assert_true(n_high > 0 && n_low > 0 && n_mid > 0);
}

/* Per-pair factors (GGUF's rope_freqs.weight): every factor f is linear
** scaling by f, bit for bit; factor 1 on a pair leaves it as unscaled; and
** a missing, misshapen or non-positive table is refused. */
static void test_rope_freq_factors(void **state)
{
    (void)state;
    enum { HD = 64 };
    RopeCfg none = {1, HD, HD, RAD_ROPE_MODE_ADJACENT, 500000, 0, 1, 1, 4, 8192, NULL, 0};
    RopeCfg lin = none, tab = none;
    lin.scaling = RAD_ROPE_SCALING_LINEAR;
    lin.factor = 4;
    float f4[HD / 2], mixed[HD / 2];
    for (int i = 0; i < HD / 2; i++) f4[i] = 4.0f, mixed[i] = i % 2 ? 1.0f : 4.0f;
    tab.scaling = RAD_ROPE_SCALING_FACTORS;
    tab.freq_factors = f4;
    tab.n_factors = HD / 2;
    float a[HD], b[HD];
    int32_t p = 777;
    for (int i = 0; i < HD; i++) a[i] = b[i] = 0.25f + (float)i / HD;
    assert_int_equal(rope(&tab, a, &p, 1), RAD_OK);
    assert_int_equal(rope(&lin, b, &p, 1), RAD_OK);
    assert_memory_equal(a, b, sizeof a);

    float d[HD];
    for (int i = 0; i < HD; i++) a[i] = d[i] = 0.25f + (float)i / HD;
    tab.freq_factors = mixed;
    assert_int_equal(rope(&tab, a, &p, 1), RAD_OK);
    assert_int_equal(rope(&none, d, &p, 1), RAD_OK);
    for (int i = 0; i < HD / 2; i++)    /* pairs (2i, 2i+1) in the adjacent layout */
        if (i % 2) assert_memory_equal(a + 2 * i, d + 2 * i, 2 * sizeof(float));
        else assert_memory_equal(a + 2 * i, b + 2 * i, 2 * sizeof(float));

    RopeCfg bad = tab;
    bad.freq_factors = NULL;
    assert_int_equal(rope(&bad, a, &p, 1), RAD_E_ARG);
    bad = tab;
    bad.n_factors = HD / 2 - 1;
    assert_int_equal(rope(&bad, a, &p, 1), RAD_E_SHAPE);
    mixed[3] = 0.0f;
    assert_int_equal(rope(&tab, a, &p, 1), RAD_E_ARG);
}

/* Against HF transformers 5.x: LlamaRotaryEmbedding with rope_type llama3
** (theta 5e5, factor 8, low 1, high 4, orig 8192), head_dim 16, position
** 3000, x[d] = (d + 1)/16 - 0.5, through apply_rotary_pos_emb in float32.
** Its eight pairs span all three llama3 bands. */
static void test_rope_matches_hf(void **state)
{
    (void)state;
    static const float hf[16] = {
        0.413161576f,  0.382813901f, -0.248714805f, 0.220173046f,  -0.311796248f, -0.162837744f,
        -0.0712123215f, -0.001933755f, -0.156875744f, 0.0985064507f, 0.266370893f,  -0.276629418f,
        -0.188667998f, 0.360185891f, 0.436166614f,  0.499996275f};
    RopeCfg r = {1, 16, 16, RAD_ROPE_MODE_NEOX, 500000, RAD_ROPE_SCALING_LLAMA3, 8, 1, 4, 8192};
    float x[16];
    int32_t pos = 3000;
    for (int d = 0; d < 16; d++) x[d] = (float)(d + 1) / 16 - 0.5f;
    assert_int_equal(rope(&r, x, &pos, 1), RAD_OK);
    for (int d = 0; d < 16; d++) assert_close(x[d], hf[d], 1e-6);
}

/* YaRN computed here in double from transformers' _compute_yarn_parameters
** (find_correction_range, linear_ramp_factor, the blend), independently of
** ref's f32 steps: at small positions the two agree to rounding. */
static void yarn_direct(const RopeCfg *r, const float *x, int32_t pos, double *out)
{
    const double pi = 3.14159265358979323846;
    double bf = r->beta_fast > 0 ? r->beta_fast : 32, bs = r->beta_slow > 0 ? r->beta_slow : 1;
    double dim = (double)r->n_rot, base = r->theta;
    double lo = dim * log(r->orig / (bf * 2 * pi)) / (2 * log(base));
    double hi = dim * log(r->orig / (bs * 2 * pi)) / (2 * log(base));
    if (r->truncate) lo = floor(lo), hi = ceil(hi);
    lo = lo > 0 ? lo : 0;
    hi = hi < dim - 1 ? hi : dim - 1;
    if (lo == hi) hi += 0.001;
    double attn = r->attn_factor > 0 ? r->attn_factor : r->factor <= 1 ? 1 : 0.1 * log(r->factor) + 1;
    int64_t half = r->n_rot / 2;
    for (int64_t d = 0; d < r->head_dim; d++) out[d] = x[d];
    for (int64_t i = 0; i < half; i++) {
        double pf = pow(base, 2.0 * (double)i / dim);
        double ramp = ((double)i - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double keep = 1 - ramp, inv = (1 / (r->factor * pf)) * (1 - keep) + (1 / pf) * keep;
        double c = cos(pos * inv) * attn, s = sin(pos * inv) * attn;
        int64_t a = r->mode == RAD_ROPE_MODE_NEOX ? i : 2 * i, b = r->mode == RAD_ROPE_MODE_NEOX ? i + half : 2 * i + 1;
        out[a] = x[a] * c - x[b] * s;
        out[b] = x[b] * c + x[a] * s;
    }
}

static void test_rope_yarn(void **state)
{
    (void)state;
    /* both layouts, partial rotary, truncate on and off, defaults and given
    ** betas and attention factors, a factor that makes the ramp's ends meet */
    RopeCfg cfgs[] = {
        {1, 64, 64, RAD_ROPE_MODE_NEOX, 1000000, RAD_ROPE_SCALING_YARN, 4, 0, 0, 32768, .truncate = 1},
        {1, 64, 48, RAD_ROPE_MODE_ADJACENT, 10000, RAD_ROPE_SCALING_YARN, 16, 0, 0, 2048, .truncate = 0,
         .beta_fast = 24, .beta_slow = 2, .attn_factor = 1.25},
        {1, 32, 32, RAD_ROPE_MODE_NEOX, 150000, RAD_ROPE_SCALING_YARN, 32, 0, 0, 4096, .truncate = 0,
         .beta_fast = 32, .beta_slow = 1},
        {1, 16, 16, RAD_ROPE_MODE_NEOX, 10000, RAD_ROPE_SCALING_YARN, 0.5, 0, 0, 64, .truncate = 1,
         .beta_fast = 4, .beta_slow = 4},
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++)
        for (int32_t pos = 0; pos < 40; pos += 7) {
            float x[64];
            double want[64];
            for (int d = 0; d < 64; d++) x[d] = (float)((d * 37) % 29) / 14.0f - 1.0f;
            yarn_direct(&cfgs[k], x, pos, want);
            assert_int_equal(rope(&cfgs[k], x, &pos, 1), RAD_OK);
            for (int64_t d = 0; d < cfgs[k].head_dim; d++) assert_close(x[d], want[d], 2e-6);
        }
    /* bad YaRN parameters */
    RopeCfg bad = cfgs[0];
    float x[64] = {0};
    int32_t p = 5;
    bad.factor = 0;
    assert_int_equal(rope(&bad, x, &p, 1), RAD_E_ARG);
    bad = cfgs[0], bad.orig = 0;
    assert_int_equal(rope(&bad, x, &p, 1), RAD_E_ARG);
    bad = cfgs[0], bad.truncate = 2;
    assert_int_equal(rope(&bad, x, &p, 1), RAD_E_ARG);
    bad = cfgs[0], bad.beta_fast = -1;
    assert_int_equal(rope(&bad, x, &p, 1), RAD_E_ARG);
    bad = cfgs[0], bad.attn_factor = NAN;
    assert_int_equal(rope(&bad, x, &p, 1), RAD_E_ARG);
    bad = cfgs[0], bad.scaling = 5;
    assert_int_equal(rope(&bad, x, &p, 1), RAD_E_UNSUPPORTED);
}

/* Against transformers 5.x (ROPE_INIT_FUNCTIONS["yarn"] and
** apply_rotary_pos_emb in float32), head_dim 16, x[d] = (d + 1)/16 - 0.5:
** a Qwen3 long-context config (theta 1e6, factor 4, original context
** 32768, truncate by default) at position 3000, and gpt-oss's (theta
** 150000, factor 32, beta_fast 32, beta_slow 1, truncate false, original
** context 4096) at position 5000.  transformers' attention factors were
** 1.1386 and 1.3466 (0.1 ln(factor) + 1). */
static void test_rope_yarn_matches_hf(void **state)
{
    (void)state;
    static const float qwen3[16] = {
        0.470437944f,  -0.276706636f, -0.413624048f, -0.308135718f,  -0.370032221f, -0.197843552f,
        -0.0829578936f, -0.00240111188f, -0.178623348f, 0.354975998f, -0.0332191736f, 0.259059817f,
        -0.187788427f, 0.404267818f, 0.496322632f, 0.569309652f};
    static const float gptoss[16] = {
        -0.00797107816f, 0.258567989f, 0.288215697f, 0.0958315283f, -0.153788939f, -0.213485241f,
        -0.0962193459f, -0.00311127747f, 0.595053613f, -0.465257496f, -0.397184312f, -0.466340959f,
        -0.466017812f, 0.487592071f, 0.587276995f, 0.673279583f};
    RopeCfg q = {1, 16, 16, RAD_ROPE_MODE_NEOX, 1000000, RAD_ROPE_SCALING_YARN, 4, 0, 0, 32768, .truncate = 1};
    RopeCfg g = {1, 16, 16, RAD_ROPE_MODE_NEOX, 150000, RAD_ROPE_SCALING_YARN, 32, 0, 0, 4096, .truncate = 0,
                 .beta_fast = 32, .beta_slow = 1};
    const RopeCfg *cfg[2] = {&q, &g};
    const float *want[2] = {qwen3, gptoss};
    int32_t pos[2] = {3000, 5000};
    for (int k = 0; k < 2; k++) {
        float x[16];
        for (int d = 0; d < 16; d++) x[d] = (float)(d + 1) / 16 - 0.5f;
        assert_int_equal(rope(cfg[k], x, &pos[k], 1), RAD_OK);
        for (int d = 0; d < 16; d++) assert_close(x[d], want[k][d], 1e-6);
    }
}

#define ROPE_TESTS                                                                         \
    cmocka_unit_test(test_rope_position_zero), cmocka_unit_test(test_rope_layouts),      \
        cmocka_unit_test(test_rope_partial_heads), cmocka_unit_test(test_rope_scaling), \
        cmocka_unit_test(test_rope_freq_factors), \
        cmocka_unit_test(test_rope_matches_hf), cmocka_unit_test(test_rope_yarn), \
        cmocka_unit_test(test_rope_yarn_matches_hf)
