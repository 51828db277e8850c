/*
** model_open.h: what the application adds when it opens a model: the
** tokenizer cache folder (so a GGUF's tokenizer is built once, not every
** run) and a one-line loading display on a terminal.
**
** The line is drawn on standard error only when it is a terminal (and TERM
** is not "dumb"), redrawn in place at each stage rad_engine_open reports,
** and erased when the open returns, so what follows starts on a clean line.
** Piped, or with --quiet, nothing is written.  The mode line, when there is
** one, is written piped too: it says how the model is held.
*/
#ifndef RAD_MODEL_OPEN_H
#define RAD_MODEL_OPEN_H

#include <stdio.h>

#include "../../engine/include/radiance.h"

typedef struct RadModelOpen {
    RadEngineOptions *opt; /* the options prepared, whose fields done clears */
    FILE *tty;      /* where the line goes; NULL: no line */
    char name[96];  /* the model as the line shows it */
    int drawn;      /* a line is on the terminal now */
    char *cache;    /* the tokenizer cache folder (malloc'd), or NULL */
} RadModelOpen;

/* Set opt's tokenizer_cache and progress fields for opening `name` (the
** spec as the user wrote it); quiet: no line.  Call rad_model_open_done
** after rad_engine_open returns, whatever it returned: it erases the line
** and clears those fields again, so opt can open another engine (a draft
** model) without them. */
void rad_model_open_prepare(RadModelOpen *m, RadEngineOptions *opt, const char *name, int quiet);
void rad_model_open_done(RadModelOpen *m);

/* "mode: ..." on standard error when the engine holds the model other than
** simply in memory (its experts streamed, or paged from the file:
** rad_engine_mode); nothing when quiet or when there is nothing to say. */
void rad_model_say_mode(const RadEngine *e, int quiet);

/* The tokenizer cache: $XDG_CACHE_HOME/radiance/tokenizers (only an
** absolute XDG_CACHE_HOME counts), else ~/.cache/radiance/tokenizers; its
** missing parents are made, but never HOME itself.  malloc'd, or NULL when
** there is no such place. */
char *rad_tokenizer_cache_dir(void);

#endif /* RAD_MODEL_OPEN_H */
