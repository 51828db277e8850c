/*
** kernels_bad_abi.c: a kernel library built against another kernel ABI
** (test_plugin.c expects it refused by name).  It has no rows: the load must
** stop at the version check, before anything reads the tables.
*/
#include "../../../kernels/rad_kernel.h"

const RadKernelLibrary rad_kernel_library = {
    .abi_version = RAD_KERNEL_ABI_VERSION + 41,
    .name = "bad_abi",
    .description = "a kernel library from another ABI",
};
