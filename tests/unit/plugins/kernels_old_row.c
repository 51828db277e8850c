/*
** kernels_old_row.c: a kernel library of this ABI version built against an
** earlier header of it: its table and its rows end before the fields added
** since (RadKernelLibrary.preference, RadKernelRow.slices_ok), and it says
** so through struct_size and row_size.  test_plugin.c expects it loaded,
** every row read at its own stride, and the missing fields read as zero.
*/
#include <stddef.h>

#include "../../../kernels/rad_kernel.h"

/* A row as the first header of ABI 3 had it: everything up to relayout. */
typedef struct OldRow {
    const char *op, *name;
    int n_constraints;
    RadConstraint constraints[RAD_MAX_CONSTRAINTS];
    int priority, domain, kv_block_size;
    RadKernelLaunch launch;
    size_t (*scratch_bytes)(const RadKernelArgs *args);
    size_t (*relayout_bytes)(const RadTensor *weight);
    int (*relayout)(const RadTensor *weight, void *dst);
} OldRow;

static int launch(const RadKernelArgs *a)
{
    (void)a;
    return 0;
}

static const RadOpSchema schemas[] = {
    {.op = "old_op", .n_params = 1, .params = {{"M", RAD_PARAM_RANGE}}, .n_operands = 1,
     .operands = {{"x", RAD_ROLE_INOUT, 0}}},
};

static const OldRow rows[] = {
    {.op = "old_op", .name = "old_first", .priority = 3, .domain = RAD_DOMAIN_HOST, .launch = launch},
    {.op = "old_op", .name = "old_second", .priority = 7, .domain = RAD_DOMAIN_HOST, .launch = launch},
};

const RadKernelLibrary rad_kernel_library = {
    .abi_version = RAD_KERNEL_ABI_VERSION,
    .struct_size = (int)offsetof(RadKernelLibrary, preference),
    .schema_size = (int)sizeof(RadOpSchema),
    .row_size = (int)sizeof(OldRow),
    .name = "old_row",
    .description = "rows of an earlier header of this ABI",
    .n_schemas = 1,
    .schemas = schemas,
    .n_rows = 2,
    .rows = (const RadKernelRow *)rows,
    .preference = 99,           /* past struct_size: the core must not read it */
};
