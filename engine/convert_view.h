/*
** convert_view.h: the converter's reader of checkpoint tensors kept in
** another layout than their weight (convert_view.c says which).
*/
#ifndef RAD_CONVERT_VIEW_H
#define RAD_CONVERT_VIEW_H

#include "engine_internal.h"
#include "../formats/checkpoint.h"

/* 1 when weight w is read through a view: its map entry has layout flags,
** or none of its COPY sources is present but one's MXFP4 form is. */
int rad_convert_view_applies(const RadCheckpoint *ck, const RadWeightEntry *w);

/* The weight's bytes in encoding `enc` (malloc'd, *size bytes), read
** through the view; NULL with the message set (one line naming the
** tensor), or NULL with *absent = 1 for an optional weight the checkpoint
** does not have. */
void *rad_convert_view(const RadCheckpoint *ck, const RadWeightEntry *w, int enc, uint64_t *size, int *absent);

#endif /* RAD_CONVERT_VIEW_H */
