/*
** arch_duplicate.c: a well-formed architecture plugin claiming ("dup",
** "f32").  The build compiles it twice, as dup_a.so and dup_b.so in one
** folder, so test_plugin.c can check that two plugins claiming the same
** (id, quant) pair are refused with both files named.  DUP_NS makes the
** plugin names differ; the pair they claim does not.
*/
#include "../../../arch/rad_arch.h"

#ifndef DUP_NS
#define DUP_NS dup
#endif

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance)
{
    (void)b, (void)meta, (void)ctx, (void)instance;
    return 0;
}

void rad_arch_release(void *instance) { (void)instance; }

void rad_arch_step(void *instance, RadCtx *c, const RadBatch *batch) { (void)instance, (void)c, (void)batch; }

RAD_ARCH_PLUGIN(DUP_NS, "dup", "f32", "0", "one of two plugins claiming the same pair")
