/* common/base/status.c: formatting of the one-line error messages (see status.h). */
#include "common/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(char *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return code;
}

int err_prefix(char *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    char old[ERR_LEN], pre[ERR_LEN];
    snprintf(old, sizeof old, "%s", err);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    /* Joined by hand so an over-long message is cut at ERR_LEN. */
    size_t n = strlen(pre), m = strlen(old);
    if (n > ERR_LEN - 3)
        n = ERR_LEN - 3;
    memcpy(err, pre, n);
    memcpy(err + n, ": ", 2);
    n += 2;
    if (m > ERR_LEN - 1 - n)
        m = ERR_LEN - 1 - n;
    memcpy(err + n, old, m);
    err[n + m] = 0;
    return code;
}
