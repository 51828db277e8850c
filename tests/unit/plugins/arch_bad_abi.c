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
        RAD_ARCH_ABI_VERSION + 98, RAD_PLUGIN_ARCH, "bad_abi_f32", "bad_abi", "f32", "0", "wrong ABI"};
    return &info;
}

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx)
{
    (void)b, (void)meta, (void)ctx;
    return 0;
}

void rad_arch_step(RadCtx *c, const RadBatch *batch) { (void)c, (void)batch; }
