/*
** kernels_no_export.c: a shared object in the kernels folder that does not
** export rad_kernel_library (the table is there under another name), so
** test_plugin.c can check the refusal names the file and the symbol.
*/
#include "../../../kernels/rad_kernel.h"

const RadKernelLibrary rad_kernel_library_v2 = {
    RAD_KERNEL_LIBRARY_SIZES,
    .name = "misnamed",
    .description = "exports its table under the wrong symbol",
};
