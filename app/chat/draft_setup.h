/*
** draft_setup.h: --draft for run, chat and bench.
**
** `--draft ngram` guesses by prompt lookup; `--draft MODEL` (any model spec)
** runs a smaller model of the same vocabulary as a draft; `--draft-max K`
** bounds the guesses per step (default 8).  The engine of the main model
** must be opened with max_spec >= K: rad_draft_max_spec says what to ask.
*/
#ifndef RAD_DRAFT_SETUP_H
#define RAD_DRAFT_SETUP_H

#include "../../engine/draft.h"
#include "../../engine/include/radiance.h"

#define RAD_DRAFT_MAX_DEFAULT 8

/* The drafter `spec` names, for the target engine `target`: n-gram, or a
** draft model opened like `base` (its model path replaced), whose engine
** is returned in *draft_engine for the caller to close after the drafter is
** freed (NULL for n-gram).  RAD_E_ARG / RAD_E_UNSUPPORTED naming --draft. */
int rad_draft_open(const char *spec, const RadEngine *target, const RadEngineOptions *base, int offline, int quiet,
                   RadDrafter *out, RadEngine **draft_engine);

#endif /* RAD_DRAFT_SETUP_H */
