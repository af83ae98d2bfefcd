/* common/base/text.c: untrusted bytes shown in a message (see text.h). */
#include "common/base/text.h"

#include <stdio.h>
#include <string.h>

size_t text_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, min = 0x10000;
    else
        return 0;
    if (n < k)
        return 0;
    unsigned cp = c & (0x7fu >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

const char *text_escape(const char *s, size_t n, char *out, size_t size)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0;
    while (i < n) {
        char piece[8];
        size_t len;
        unsigned c = p[i];
        size_t k = c >= 0x80 ? text_utf8_len(p + i, n - i) : 0;
        if (k == 2 && c == 0xc2 && p[i + 1] < 0xa0)
            k = 0; /* a C1 control (U+0080..U+009F): a terminal may obey it */
        if (k) {
            memcpy(piece, p + i, k);
            len = k;
        } else if (c == '\n' || c == '\t' || c == '\r') {
            piece[0] = '\\';
            piece[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
            len = 2;
            k = 1;
        } else if (c < 0x20 || c >= 0x7f) {
            len = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
            k = 1;
        } else {
            piece[0] = (char)c;
            len = k = 1;
        }
        if (o + len + 4 > size) { /* room for "..." and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, piece, len);
        o += len;
        i += k;
    }
    out[o] = '\0';
    return out;
}

void text_say(FILE *f, const char *prefix, const char *msg)
{
    char shown[4096];
    fprintf(f, "%s%s\n", prefix, text_escape(msg, strlen(msg), shown, sizeof shown));
}

int text_is_decimal(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (!digits)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t exp = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, exp++;
        if (!exp)
            return 0;
    }
    return i == n;
}
