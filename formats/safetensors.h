/*
** safetensors.h: read-only access to one .safetensors file.
**
** The file is mapped, its JSON header is checked as strictly as the
** reference parser checks it, and every tensor becomes a RadStTensor whose
** `data` points into the map.  Nothing is copied and nothing is converted:
** turning bf16 into q8_0 is the converter's business (quantize.h).
*/
#ifndef RAD_SAFETENSORS_H
#define RAD_SAFETENSORS_H

#include "rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RadStTensor {
    char *name;
    char dtype[12];        /* as written: "F32", "BF16", ... */
    int enc;               /* RAD_ENC_F32/F16/BF16/I32/I64/I8/I16/F64/FP8_E4M3, or -1 if no
                              RadEncoding matches (U8, BOOL, F8_E5M2, a dtype newer than us) */
    int rank;              /* 0..8 */
    int64_t shape[8];      /* outermost first, as the file; shape[rank-1] is contiguous */
    const void *data;      /* points into the read-only map */
    uint64_t size;         /* bytes */
} RadStTensor;

typedef struct RadSafetensors {
    char *path;
    const uint8_t *map; uint64_t file_size;
    int n_tensors; RadStTensor *tensors;   /* sorted by name (strcmp) for bsearch */
} RadSafetensors;

/* Map the file at `path` read-only and validate it:
**   - an 8-byte little-endian header length N, N <= 100,000,000, 8 + N <= file size;
**   - the header is a JSON object (first byte '{'), no key twice;
**   - "__metadata__", if present, maps strings to strings (it is not kept);
**   - every other key is a tensor {"dtype": string, "shape": [ints >= 0] (rank <= 8),
**     "data_offsets": [begin, end]} with begin <= end <= the data buffer's size;
**   - end - begin == product(shape) * the dtype's size, for every dtype the
**     safetensors format defines (a dtype name it does not define is kept,
**     unchecked, with enc = -1; its bytes still lie inside the buffer);
**   - the tensors tile the data buffer exactly: no overlap, no gap, no tail.
** On success *out owns the map and the table; close it with
** rad_safetensors_close.  Returns 0, RAD_E_NOTFOUND (no such file), RAD_E_IO,
** RAD_E_FORMAT (any rule above broken; the message names the tensor and the
** rule) or RAD_E_NOMEM; *out is NULL on failure. */
int rad_safetensors_open(const char *path, RadSafetensors **out);

/* The tensor called `name`, or NULL.  O(log n).  The pointer lives as long
** as `st`. */
const RadStTensor *rad_safetensors_find(const RadSafetensors *st, const char *name);

/* Unmap and free everything; every RadStTensor and data pointer handed out
** becomes invalid.  NULL is allowed. */
void rad_safetensors_close(RadSafetensors *st);

#ifdef __cplusplus
}
#endif
#endif /* RAD_SAFETENSORS_H */
