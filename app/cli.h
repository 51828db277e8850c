/*
** cli.h: what every radiance command shares at its edge with the user:
** output that is checked, text made safe for a terminal, JSON printed one
** way, the clock, and how a command line names a model.
**
**   Output.  A command's answer is worth nothing if it did not reach its
**   destination, so every write to stdout and to an output file is
**   checked: a full disk, /dev/full, a closed stdout are exit status 1 with
**   the reason (never 0 with the output lost).  Output files are written
**   under a temporary name beside the target and renamed into place when
**   complete, so a failure leaves no empty or half-written file.
**
**   Terminal safety.  Text that comes from a model file (a chat template,
**   tensor names, metadata) or from a model (its replies, stored messages)
**   is hostile: an escape sequence in it could retitle the terminal, move
**   the cursor, or hide what follows.  rad_safe_* show every control
**   character as a visible escape instead of emitting it.  The one
**   exception is documented pipe mode: `run` writes the model's bytes as
**   they are when stdout is not a terminal.
*/
#ifndef RAD_CLI_H
#define RAD_CLI_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* ------------------------------------------------------------ output */

/* Flush f and report whether everything written to it arrived:
** RAD_OK, or RAD_E_IO with "writing WHAT: REASON" set. */
int rad_out_check(FILE *f, const char *what);

/* At the end of main: flush and close stdout; when a write to it failed,
** print "radiance: writing standard output: REASON" and return 1 (status
** when that was already a failure), else status. */
int rad_out_finish(int status);

/* An output file written under a temporary name (PATH.partial.XXXXXX,
** beside PATH, registered for removal on a signal) and renamed over PATH
** when committed.  Any failure removes the temporary: PATH is either the
** whole new file or what it was before.  A PATH that exists and is not a
** regular file (a device such as /dev/null or /dev/full, a FIFO,
** /dev/stdout, a process substitution) is written in place, with no
** temporary: renaming over it would replace the device with a file. */
typedef struct RadOutFile {
    FILE *f;                    /* write here */
    char *path, *tmp;           /* tmp: NULL when PATH is written in place */
    int slot;                   /* rad_cleanup slot */
} RadOutFile;

/* RAD_OK, or RAD_E_IO naming path and the reason. */
int rad_outfile_open(RadOutFile *o, const char *path);
/* Flush, sync, close and rename into place; RAD_E_IO with the reason (the
** temporary removed) when any step fails. */
int rad_outfile_commit(RadOutFile *o);
/* Give up: close and remove the temporary.  Safe on a zeroed RadOutFile. */
void rad_outfile_abort(RadOutFile *o);

/* ------------------------------------------------------------ terminal safety */

enum {
    RAD_SAFE_LINE = 0,          /* one line: newlines and tabs are escaped too (names, titles) */
    RAD_SAFE_TEXT = 1           /* running text: newlines and tabs stay (messages, templates) */
};

/* The text of s[0..n) safe to print on a terminal: each C0 control
** character (but newline and tab with RAD_SAFE_TEXT), DEL, each C1 control
** (U+0080..U+009F), each bidirectional override or isolate (U+202A..U+202E,
** U+2066..U+2069) and each byte that is not part of valid UTF-8 is written
** as a visible escape (\x1b, \r, \u009b, \u202e, \xff); everything else is
** copied.  malloc'd and NUL-terminated; NULL when out of memory. */
char *rad_safe_text(const char *s, size_t n, int flags);

/* The one rule behind rad_safe_text, for a printer that walks text itself
** (the full-screen chat's wrapper): the character at s[0..n) (n > 0) takes
** *used bytes; the result is the length of its visible escape, written to
** esc, or 0 when it may be printed as it is. */
#define RAD_SAFE_ESC_MAX 16
int rad_safe_escape(const char *s, size_t n, int flags, size_t *used, char esc[RAD_SAFE_ESC_MAX]);

/* Write the safe form of s[0..n) to f (nothing is written for n 0). */
void rad_safe_fwrite(FILE *f, const char *s, size_t n, int flags);

/* The safe form of a NUL-terminated string, for a printf argument: the
** result lives until the 8th call after this one (a ring of buffers), so
** a few may appear in one printf.  s NULL gives "". */
const char *rad_safe(const char *s);
const char *rad_safe_multiline(const char *s);

/* Display columns of valid UTF-8 text (wide characters count two). */
int rad_text_columns(const char *s);

/* ------------------------------------------------------------ JSON */

/* A float a user gave (or a model file recommends), as the shortest
** decimal that reads back as the same float: 0.95f is 0.95, not
** 0.949999988079071. */
json_t *rad_json_f32(float v);
/* A measured double rounded to 3 decimals (timings: 12.345). */
json_t *rad_json_ms(double v);

/* Print j on one line to f, then a newline; reals with at most 15
** significant digits.  Steals the reference.  RAD_OK, or RAD_E_IO when
** the write failed ("writing standard output: REASON"). */
int rad_json_print(json_t *j, FILE *f);

/* ------------------------------------------------------------ the rest */

/* Milliseconds of the monotonic clock. */
double rad_now_ms(void);

/* A short name for a model spec as the user gave it, for a status line or
** a table column: an absolute or relative path becomes its file name;
** aliases and hf:ORG/REPO stay as they are.  Written into buf. */
const char *rad_model_display_name(const char *spec, char *buf, size_t cap);

/* Whether a command-line word names a model rather than being the first
** word of a prompt (the `run [MODEL] PROMPT` grammar, radiance(1)): an alias
** in the alias lists, a spec with a scheme (hf:), a path that exists, or a
** word without white space that can only be a path (it holds a '/' or ends
** in .gguf or .rad).  Anything else, such as "What is the capital of
** France?" or "hello", is prompt text. */
int rad_word_is_model(const char *word);

#endif /* RAD_CLI_H */
