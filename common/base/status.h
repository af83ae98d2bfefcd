/* common/status.h: the error convention shared by every module.
 *
 * Library code never exits.  A function that can fail returns one of the codes
 * below and writes one line (no "ddpbench: error:" prefix, no newline) into the
 * caller's buffer of ERR_LEN bytes.  Only main() turns a code into an exit
 * status, so tests can call anything without being killed by it. */
#ifndef DDPBENCH_STATUS_H
#define DDPBENCH_STATUS_H

#include <stddef.h>

enum {
    DDP_OK = 0,
    DDP_ERR_RUNTIME = 1, /* a fault while running: dead rank, device error, timeout */
    DDP_ERR_INPUT = 2,   /* bad options, bad files: the user's input is wrong */
    DDP_ERR_REGRESSED = 3 /* --baseline: throughput regressed past --tolerance */
};

#define ERR_LEN 512

/* Format the message into err (may be NULL) and return code. */
int err_set(char *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an existing message in place: "<prefix>: <old message>". */
int err_prefix(char *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
