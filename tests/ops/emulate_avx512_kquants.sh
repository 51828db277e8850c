#!/usr/bin/env bash
# emulate_avx512_kquants.sh: run tests/ops/test_cpu_kquants.c against
# kernels/cpu/dot_kquants_avx512.c on a machine WITHOUT AVX-512.
#
# The AVX-512 file is compiled against SIMDe (Debian: libsimde-dev), a
# header library that implements the x86 intrinsics in portable C, and the
# test is linked with a stand-in for cpu_features.c that reports AVX-512 with
# VNNI.  This checks the kernels' logic (element positions, scales, tiles
# bit for bit against the dot); it says nothing about speed, and SIMDe's
# versions of three intrinsics it lacks are restated below.  Not part of
# `make test`; run from the repository root after `make build/tests/ops/test_cpu_kquants`.
set -euo pipefail
[ -f /usr/include/simde/x86/avx512.h ] || { echo "needs libsimde-dev" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/avx512_emul.c" <<'EOF'
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <stdint.h>
#include <string.h>
static inline __m512 shim_cvtepi32_ps(__m512i a)
{
    int32_t v[16];
    float f[16];
    __m512 r;
    memcpy(v, &a, 64);
    for (int i = 0; i < 16; i++) f[i] = (float)v[i];
    memcpy(&r, f, 64);
    return r;
}
static inline __m512i shim_mask_srli_epi16(__m512i src, uint32_t k, __m512i a, int imm)
{
    uint16_t s[32], x[32];
    __m512i r;
    memcpy(s, &src, 64);
    memcpy(x, &a, 64);
    for (int i = 0; i < 32; i++)
        if ((k >> i) & 1) s[i] = (uint16_t)(x[i] >> imm);
    memcpy(&r, s, 64);
    return r;
}
/* gcc's order: halves, quarters, then pairs */
static inline float shim_reduce_add_ps(__m512 a)
{
    float f[16], t3[8], t6[4];
    memcpy(f, &a, 64);
    for (int i = 0; i < 8; i++) t3[i] = f[8 + i] + f[i];
    for (int i = 0; i < 4; i++) t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}
#define _mm512_cvtepi32_ps     shim_cvtepi32_ps
#define _mm512_mask_srli_epi16 shim_mask_srli_epi16
#define _mm512_reduce_add_ps   shim_reduce_add_ps
#include "kernels/cpu/dot_kquants_avx512.c"
EOF

cat > "$tmp/features.c" <<'EOF'
#include "kernels/cpu/cpu_internal.h"
int cpu_has_avx512_vnni = 1, cpu_has_avx512_bf16 = 0;
int cpu_isa_detect(void) { return CPU_ISA_AVX512; }
const char *cpu_isa_name(int isa)
{
    static const char *n[] = {"portable", "avx2", "avx512", "neon"};
    return n[isa];
}
EOF

CC=${CC:-cc}
FLAGS="-std=c11 -D_GNU_SOURCE -Ibase -I. -O1"
$CC -std=gnu11 -D_GNU_SOURCE -Ibase -I. -O1 -mavx2 -mfma -mf16c -w -Wno-psabi -c "$tmp/avx512_emul.c" -o "$tmp/avx512_emul.o"
$CC $FLAGS -c "$tmp/features.c" -o "$tmp/features.o"
$CC $FLAGS -mavx2 -mfma -mf16c -c kernels/cpu/dot_kquants_avx2.c -o "$tmp/avx2.o"
$CC $FLAGS -mavx2 -mfma -mf16c -c kernels/cpu/act_q8k_avx2.c -o "$tmp/act_avx2.o"
$CC $FLAGS -o "$tmp/test" tests/ops/test_cpu_kquants.c kernels/cpu/dot_kquants_portable.c kernels/cpu/act_q8k.c \
    kernels/ops/dequant.c kernels/ops/dequant_kquants.c base/encoding.c base/error.c formats/quantize.c \
    formats/quantize_kquants.c formats/gguf.c formats/file_access.c "$tmp/avx512_emul.o" "$tmp/features.o" "$tmp/avx2.o" \
    "$tmp/act_avx2.o" -lcmocka -lm
"$tmp/test"
