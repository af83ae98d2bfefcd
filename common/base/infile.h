/* common/base/infile.h: opening a file the user named for reading, without
 * ever blocking and only when it is a regular file.
 *
 * open(2) on a FIFO waits until something opens its other end, and a device
 * or a FIFO has no size to check a hostile file against; so every input
 * (--data, --targets, --init, --resume, --baseline) is opened here: with
 * O_NONBLOCK (a FIFO opens at once), checked with fstat to be a regular
 * file, then switched back to blocking reads.  Anything else is refused with
 * what it is ("is a FIFO, not a regular file"). */
#ifndef DDPBENCH_INFILE_H
#define DDPBENCH_INFILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* "a FIFO", "a character device", "a directory", ... for a st_mode. */
const char *file_kind_name(mode_t mode);

/* Open path read-only as a stdio stream ("rb"): *f and *size on success;
 * DDP_ERR_INPUT with the reason in err ("cannot open: No such file or
 * directory", "is a FIFO, not a regular file") otherwise.  No path in the
 * message: callers prefix it. */
int infile_fopen(const char *path, FILE **f, uint64_t *size, char *err);
/* The whole file into *text (NUL terminated; *len bytes, the caller frees
 * it), refused over max bytes or when it changed size while read.  No path
 * in the message, as above. */
int infile_read(const char *path, size_t max, char **text, size_t *len, char *err);

#endif
