/*
** kernels_bad_abi.c: a kernel library built against the previous kernel ABI
** (version 2: no size fields in its table).  test_plugin.c expects it
** refused by name, with both version numbers.  It has no rows: the load
** must stop at the version check, before anything reads the tables.
*/
#include "../../../kernels/rad_kernel.h"

/* RadKernelLibrary as kernel ABI 2 laid it out. */
typedef struct KernelLibraryV2 {
    int abi_version;
    const char *name, *description;
    int n_schemas;
    const void *schemas;
    int n_rows;
    const void *rows;
    int (*init)(void);
    void (*fini)(void);
} KernelLibraryV2;

const KernelLibraryV2 rad_kernel_library = {
    .abi_version = RAD_KERNEL_ABI_VERSION - 1,
    .name = "bad_abi",
    .description = "built for kernel ABI 2",
};
