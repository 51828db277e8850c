/*
** encoding.c: the table of encodings radiance knows, by ggml type id.
**
** Only layout facts live here (name, elements and bytes per block); how to
** decode a block is the reference kernels' business (kernels/ref) and how to
** produce one is the quantizers' (formats/quantize.c).
*/
#include "rad_types.h"

#include <string.h>

static const RadEncodingInfo table[RAD_ENC_COUNT] = {
    [RAD_ENC_F32] = {"f32", 1, 4},
    [RAD_ENC_F16] = {"f16", 1, 2},
    [RAD_ENC_Q4_0] = {"q4_0", 32, 18},
    [RAD_ENC_Q4_1] = {"q4_1", 32, 20},
    [RAD_ENC_Q5_0] = {"q5_0", 32, 22},
    [RAD_ENC_Q5_1] = {"q5_1", 32, 24},
    [RAD_ENC_Q8_0] = {"q8_0", 32, 34},
    [RAD_ENC_Q2_K] = {"q2_k", 256, 84},
    [RAD_ENC_Q3_K] = {"q3_k", 256, 110},
    [RAD_ENC_Q4_K] = {"q4_k", 256, 144},
    [RAD_ENC_Q5_K] = {"q5_k", 256, 176},
    [RAD_ENC_Q6_K] = {"q6_k", 256, 210},
    [RAD_ENC_IQ4_NL] = {"iq4_nl", 32, 18},
    [RAD_ENC_I8] = {"i8", 1, 1},
    [RAD_ENC_I16] = {"i16", 1, 2},
    [RAD_ENC_I32] = {"i32", 1, 4},
    [RAD_ENC_I64] = {"i64", 1, 8},
    [RAD_ENC_F64] = {"f64", 1, 8},
    [RAD_ENC_BF16] = {"bf16", 1, 2},
    [RAD_ENC_MXFP4] = {"mxfp4", 32, 17},
    [RAD_ENC_FP8_E4M3] = {"fp8_e4m3", 1, 1},
};

const RadEncodingInfo *rad_encoding_info(int enc)
{
    if (enc < 0 || enc >= RAD_ENC_COUNT || !table[enc].name) return NULL;
    return &table[enc];
}

int rad_encoding_by_name(const char *name)
{
    for (int i = 0; i < RAD_ENC_COUNT; i++)
        if (table[i].name && strcmp(table[i].name, name) == 0) return i;
    return -1;
}

int64_t rad_encoding_row_bytes(int enc, int64_t n)
{
    const RadEncodingInfo *e = rad_encoding_info(enc);
    if (!e || n < 0 || n % e->block_elems) return -1;
    return n / e->block_elems * e->block_bytes;
}
