/*
** arch_bad_abi.c: an architecture plugin built against an ABI this radiance
** does not speak (test_plugin.c expects the load to be refused by name).
** Every required export is present; only rad_plugin_info's abi_version is
** wrong.
*/
#include "../../../arch/rad_arch.h"

const RadPluginInfo *rad_plugin_info(void)
{
    static const RadPluginInfo info = {
        RAD_ARCH_ABI_VERSION + 98, RAD_PLUGIN_ARCH, (int)sizeof(RadPluginInfo), "bad_abi_f32", "bad_abi", "f32", "0",
        "wrong ABI"};
    return &info;
}

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance)
{
    (void)b, (void)meta, (void)ctx, (void)instance;
    return 0;
}

void rad_arch_release(void *instance) { (void)instance; }

void rad_arch_step(void *instance, RadCtx *c, const RadBatch *batch) { (void)instance, (void)c, (void)batch; }
