/*
** text_utf8.c: reading UTF-8, and what we do with bytes that are not.
**
** Encode accepts any bytes.  Text that is not valid UTF-8 is first rewritten
** the way Python's bytes.decode("utf-8", errors="replace") and Rust's
** String::from_utf8_lossy rewrite it: each maximal ill-formed subsequence
** becomes one U+FFFD.  In practice that means every stray byte (a lone
** continuation byte, 0xC0, 0xC1, 0xF5..0xFF, each byte of an overlong or
** surrogate encoding) is its own U+FFFD, while a multi-byte sequence cut
** short ("\xE2\x82" then a non-continuation) is one U+FFFD for the bytes it
** got right.  Because the rewrite happens once, up front, everything after it
** (regexes, normalization, BPE) sees valid UTF-8 and never reads past the
** buffer.  NUL is an ordinary character.
**
** The two character classes here are the ones HF's added-token matcher uses
** through Rust's regex crate: \s (White_Space) for lstrip/rstrip and \w for
** single_word.
*/
#include "text_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* The accepted range of the second byte after each lead byte: RFC 3629's
** table, which rules out overlongs, surrogates and code points past 0x10FFFF
** at the earliest byte. */
static void second_range(unsigned lead, unsigned *lo, unsigned *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (lead == 0xE0)
        *lo = 0xA0;
    else if (lead == 0xED)
        *hi = 0x9F;
    else if (lead == 0xF0)
        *lo = 0x90;
    else if (lead == 0xF4)
        *hi = 0x8F;
}

/* Continuation bytes a lead byte announces, or -1 for a byte that can never
** start a character. */
static int trail_count(unsigned b)
{
    if (b < 0x80) return 0;
    if (b < 0xC2) return -1;
    if (b < 0xE0) return 1;
    if (b < 0xF0) return 2;
    if (b < 0xF5) return 3;
    return -1;
}

int text_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0) return 0;
    unsigned b = s[0];
    int k = trail_count(b);
    if (k == 0) {
        *cp = b;
        return 1;
    }
    if (k < 0 || (size_t)k >= n) return 0;
    unsigned lo, hi;
    second_range(b, &lo, &hi);
    if (s[1] < lo || s[1] > hi) return 0;
    uint32_t c = b & (0x3F >> k);
    for (int i = 1; i <= k; i++) {
        if (i > 1 && (s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    return k + 1;
}

size_t text_utf8_bad_run(const unsigned char *s, size_t n)
{
    int k = trail_count(s[0]);
    if (k <= 0) return 1;
    unsigned lo, hi;
    second_range(s[0], &lo, &hi);
    size_t i = 1;
    if (i < n && s[i] >= lo && s[i] <= hi)
        i++;
    else
        return 1;
    while (i < n && (int)i <= k && (s[i] & 0xC0) == 0x80) i++;
    return i;
}

/* True when s[0..n) is valid UTF-8; the ASCII part runs eight bytes at a time. */
static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = text_utf8_next(s + i, n - i, &cp);
        if (!k) return 0;
        i += (size_t)k;
    }
    return 1;
}

char *text_utf8_sanitize(const char *s, size_t n, size_t *out_n, int *nomem)
{
    const unsigned char *u = (const unsigned char *)s;
    *nomem = 0;
    *out_n = n;
    if (utf8_valid(u, n)) return NULL;
    /* Each bad byte grows to at most three (U+FFFD is EF BF BD). */
    char *out = malloc(3 * n + 1), *p = out;
    if (!out) {
        *nomem = 1;
        return NULL;
    }
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int k = text_utf8_next(u + i, n - i, &cp);
        if (k) {
            memcpy(p, u + i, (size_t)k);
            p += k;
            i += (size_t)k;
        } else {
            p += text_utf8_put(p, 0xFFFD);
            i += text_utf8_bad_run(u + i, n - i);
        }
    }
    *p = 0;
    *out_n = (size_t)(p - out);
    return out;
}

int text_utf8_put(char *p, uint32_t cp)
{
    unsigned char *u = (unsigned char *)p;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | (cp >> 18));
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int text_is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

int text_is_word(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        break;
    }
    /* Join controls, and the symbols Unicode also calls alphabetic (circled
    ** and squared Latin letters). */
    return cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) ||
           (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
           (cp >= 0x1F170 && cp <= 0x1F189);
}
