/* common/base/text.h: untrusted bytes shown in a one-line message.
 *
 * A loader that quotes what it read back to the user (a CSV field, an .npy
 * header key, a safetensors tensor name) passes it through here first, so a
 * hostile file cannot put control characters or a newline into the one-line
 * error, nor make it arbitrarily long; main() passes every error line
 * through text_escape, so a path with a newline or an ESC in it cannot
 * either.  And a number as the user may write it (text_is_decimal). */
#ifndef DDPBENCH_TEXT_H
#define DDPBENCH_TEXT_H

#include <stddef.h>

/* The first bytes of s[0..n) that fit in out[size] (size >= 5), each byte
 * outside printable ASCII as '?', and "..." when cut short.  Returns out. */
const char *text_printable(const char *s, size_t n, char *out, size_t size);

/* s as one line a terminal shows as it is: a newline, tab or carriage return
 * as \n, \t, \r, every other control byte (ESC included), DEL, a C1 control
 * and a byte that is not part of valid UTF-8 as \xNN; valid UTF-8 is kept.
 * Cut short with "..." to fit out[size] (size >= 5).  Returns out.  For
 * messages that quote what the user typed (a path with a newline in it must
 * not break the one-line error). */
const char *text_escape(const char *s, char *out, size_t size);

/* Bytes of the valid UTF-8 sequence at s (n >= 1 bytes left): 1 for ASCII,
 * 0 when invalid (overlong forms, surrogates, code points past U+10FFFF). */
size_t text_utf8_len(const unsigned char *s, size_t n);

/* Is s[0..n) a plain decimal number: [+-] digits [. digits] [e|E [+-] digits],
 * at least one digit before the exponent?  strtod also takes hex floats
 * ("0x1p3"), "inf" and "nan", which no option or data file means. */
int text_is_decimal(const char *s, size_t n);

#endif
