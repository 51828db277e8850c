/*
** arch_bad_abi.c: an architecture plugin built against the previous
** architecture ABI (version 1: no instances, and a plugin info without
** struct_size).  test_plugin.c expects the load to be refused by name, with
** both version numbers; every export of that ABI is present.
*/
#include "../../../arch/rad_arch.h"

/* RadPluginInfo as ABI 1 laid it out. */
typedef struct PluginInfoV1 {
    int abi_version, kind;
    const char *name, *arch_id, *quant, *version, *description;
} PluginInfoV1;

const PluginInfoV1 *rad_plugin_info(void)
{
    static const PluginInfoV1 info = {RAD_ARCH_ABI_VERSION - 1, RAD_PLUGIN_ARCH, "bad_abi_f32", "bad_abi", "f32", "0",
                                      "built for ABI 1"};
    return &info;
}

/* ABI 1's declare and step took no instance. */
int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx)
{
    (void)b, (void)meta, (void)ctx;
    return 0;
}

void rad_arch_step(RadCtx *c, const RadBatch *batch) { (void)c, (void)batch; }
