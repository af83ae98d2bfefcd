/* common/base/status.h: the error convention shared by every module.
 *
 * Library code never exits.  A function that can fail returns one of the codes
 * below and writes one line (no "ddpbench: error:" prefix, no newline) into the
 * caller's buffer of ERR_LEN bytes.  Only main() turns a code into an exit
 * status, so tests can call anything without being killed by it.
 *
 * One idiom carries an error up: TRY(call) returns call's code from the
 * enclosing function when it is not DDP_OK; the callee has written the
 * message.  A seam that keeps its message on the object (a backend, a
 * communicator) is called through its check function, which copies the
 * message into err with its place: TRY(backend_check(be, rc, "forward", err)).
 * Cleanup belongs to the caller of the function that TRYs (setup / loop /
 * teardown functions, not gotos). */
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
