/*
** cpu_features.c: which SIMD level this machine runs.
**
** x86-64: CPUID leaf 7 for the instruction sets, XGETBV for whether the
** operating system saves the wide registers (a CPU with AVX-512 under an OS
** that does not save ZMM state must not use it).  aarch64: HWCAP's ASIMDDP
** bit for the dot-product instructions.  RADIANCE_CPU_ISA=portable|avx2|avx512|neon
** lowers the level (never raises it past what the machine has).
*/
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__)
#include <cpuid.h>

static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static int detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return CPU_ISA_PORTABLE;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx) return CPU_ISA_PORTABLE;
    unsigned long long xcr0 = xgetbv0();
    int ymm_ok = (xcr0 & 6) == 6, zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (!ymm_ok) return CPU_ISA_PORTABLE;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return CPU_ISA_PORTABLE;
    int avx2 = (b >> 5) & 1;
    int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    cpu_has_avx512_vnni = (c >> 11) & 1;
    unsigned a1 = 0, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) cpu_has_avx512_bf16 = (a1 >> 5) & 1;
    if (!(avx2 && fma && f16c)) return CPU_ISA_PORTABLE;
    if (zmm_ok && avx512f && avx512dq && avx512bw && avx512vl) return CPU_ISA_AVX512;
    cpu_has_avx512_vnni = cpu_has_avx512_bf16 = 0;
    return CPU_ISA_AVX2;
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
static int detect(void)
{
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? CPU_ISA_NEON : CPU_ISA_PORTABLE;
}
#else
static int detect(void) { return CPU_ISA_PORTABLE; }
#endif

int cpu_has_avx512_vnni, cpu_has_avx512_bf16;

const char *cpu_isa_name(int isa)
{
    switch (isa) {
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX512: return "avx512";
    case CPU_ISA_NEON: return "neon";
    default: return "portable";
    }
}

int cpu_isa_detect(void)
{
    int isa = detect();
    const char *want = getenv("RADIANCE_CPU_ISA");
    if (want && *want) {
        int asked = -1;
        for (int i = CPU_ISA_PORTABLE; i <= CPU_ISA_NEON; i++)
            if (strcmp(want, cpu_isa_name(i)) == 0) asked = i;
        /* Only a lower level on the same family: portable always, avx2 under avx512. */
        if (asked == CPU_ISA_PORTABLE || (asked == CPU_ISA_AVX2 && isa == CPU_ISA_AVX512)) isa = asked;
    }
    return isa;
}
