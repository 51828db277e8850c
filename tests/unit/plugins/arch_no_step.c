/*
** arch_no_step.c: an architecture plugin that forgets to export
** rad_arch_step (test_plugin.c expects the load to be refused, naming the
** file and the missing export).
*/
#include "../../../arch/rad_arch.h"

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance)
{
    (void)b, (void)meta, (void)ctx, (void)instance;
    return 0;
}

void rad_arch_release(void *instance) { (void)instance; }

RAD_ARCH_PLUGIN(no_step, "no_step", "f32", "0", "no step function")
