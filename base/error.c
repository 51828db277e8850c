/*
** error.c: the per-thread error message behind every RAD_E_* code.
**
** Codes travel up the stack as return values; the sentence that explains
** them is written once, where the file name and field are known, and read
** once, at the edge, where it is printed.  Keeping it thread-local means a
** worker thread's failure never overwrites the engine thread's message.
*/
#include "rad_types.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Large enough for a declare report listing every distinct problem. */
static _Thread_local char message[16384];

const char *rad_strerror(int code)
{
    switch (code) {
    case RAD_OK: return "ok";
    case RAD_E_NOMEM: return "out of memory";
    case RAD_E_IO: return "input/output error";
    case RAD_E_FORMAT: return "malformed file";
    case RAD_E_UNSUPPORTED: return "unsupported";
    case RAD_E_SHAPE: return "shape mismatch";
    case RAD_E_NOTFOUND: return "not found";
    case RAD_E_ABI: return "plugin ABI mismatch";
    case RAD_E_ARG: return "invalid argument";
    case RAD_E_NOKERNEL: return "no kernel serves an op";
    case RAD_E_RANGE: return "out of range";
    case RAD_E_STATE: return "call out of order";
    case RAD_E_INTERRUPT: return "interrupted";
    }
    return "unknown error";
}

int rad_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return code;
}

int rad_error_prefix(int code, const char *fmt, ...)
{
    char prefix[512];
    static _Thread_local char old[sizeof message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, message, sizeof old);
    /* Truncation is fine here: a message is one line for a person. */
    size_t n = strlen(prefix);
    if (n >= sizeof message) n = sizeof message - 1;
    memcpy(message, prefix, n);
    size_t room = sizeof message - 1 - n, m = strlen(old);
    if (m > room) m = room;
    memcpy(message + n, old, m);
    message[n + m] = 0;
    return code;
}

const char *rad_error_message(void) { return message; }
void rad_error_clear(void) { message[0] = 0; }
