/* common/base/status.h: the error convention shared by every module.
 * Library code never exits: a function that can fail returns a code below
 * and writes one line (no "ddpbench: error:" prefix, no newline) into the
 * caller's buffer of ERR_LEN bytes; only main() turns a code into an exit
 * status.  TRY(call) carries a failure up; a seam that keeps its message on
 * the object is called through its check function (backend_check).  Cleanup
 * belongs to the caller of the function that TRYs (no gotos). */
#ifndef DDPBENCH_STATUS_H
#define DDPBENCH_STATUS_H

#include <stddef.h>

enum {
    DDP_OK = 0,
    DDP_ERR_RUNTIME = 1, /* a fault while running: dead rank, device error, timeout */
    DDP_ERR_INPUT = 2,   /* bad options, bad files: the user's input is wrong */
    DDP_ERR_REGRESSED = 3, /* --baseline: a figure regressed past --tolerance */
    DDP_ERR_NOISY = 4,     /* --baseline: no verdict, the interval is wider than --tolerance */
    DDP_ERR_INTERRUPTED = 5 /* SIGINT/SIGTERM/SIGHUP asked to stop (base/interrupt.h):
                               main exits with 128 + the signal */
};

#define ERR_LEN 512

#define TRY(call)                                                                          \
    do {                                                                                   \
        int try_rc_ = (call);                                                              \
        if (try_rc_ != DDP_OK)                                                             \
            return try_rc_;                                                                \
    } while (0)

/* Format the message into err (may be NULL) and return code. */
int err_set(char *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an existing message in place: "<prefix>: <old message>". */
int err_prefix(char *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
