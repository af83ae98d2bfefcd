/* common/base/infile.h: opening a file the user named for reading (--data,
 * --targets, --init, --resume, --baseline) only when it is a regular file
 * (docs/options.md), and without ever blocking: open(2) on a FIFO waits for a
 * writer, so the open is O_NONBLOCK and fstat checks what it is first. */
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
