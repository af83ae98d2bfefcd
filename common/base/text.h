/* common/base/text.h: untrusted bytes shown in a one-line message.  Every
 * line that quotes what ddpbench did not write itself (a file's field or
 * name, a child's words, a path) passes it through text_escape, so a hostile
 * file cannot put control characters on the terminal or make a line
 * arbitrarily long; main() passes every error line through it too. */
#ifndef DDPBENCH_TEXT_H
#define DDPBENCH_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* s[0..n) as one line a terminal shows as it is: a newline, tab or carriage
 * return as \n, \t, \r, every other control byte (ESC and NUL included),
 * DEL, a C1 control and a byte that is not part of valid UTF-8 as \xNN;
 * valid UTF-8 is kept.  Cut short with "..." to fit out[size] (size >= 5).
 * Returns out. */
const char *text_escape(const char *s, size_t n, char *out, size_t size);

/* One line on f: prefix, then msg escaped (its first 4 KB). */
void text_say(FILE *f, const char *prefix, const char *msg);

/* Bytes of the valid UTF-8 sequence at s (n >= 1 bytes left): 1 for ASCII,
 * 0 when invalid (overlong forms, surrogates, code points past U+10FFFF). */
size_t text_utf8_len(const unsigned char *s, size_t n);

/* Is s[0..n) a plain decimal number: [+-] digits [. digits] [e|E [+-] digits],
 * at least one digit before the exponent?  strtod also takes hex floats
 * ("0x1p3"), "inf" and "nan", which no option or data file means. */
int text_is_decimal(const char *s, size_t n);

#endif
