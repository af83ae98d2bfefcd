/* common/base/atomic_file.h: writing an output file so that it is either the
 * old file or the whole new one, never half of either.
 *
 * Every output ddpbench writes (--save, --checkpoint, --trace) goes through
 * here: the data goes to ".NAME.tmp.PID.XXXXXX" in NAME's directory, is
 * synced, and is renamed over NAME; then the directory is synced so the new
 * name survives a crash.  A writer killed at any moment leaves the old file
 * and at worst its own temporary, which the next successful write of NAME
 * removes once the writer's process is gone.  New files get the usual mode
 * (0666 less the umask).
 *
 *     afile_t a;
 *     TRY(afile_open(&a, path, err));
 *     ... afile_write(&a, buf, n) or fprintf(afile_stream(&a), ...) ...
 *     TRY(afile_commit(&a, false, err));    (on a failure it removes the temporary)
 *
 * Messages are about the file alone ("cannot create a file in directory
 * 'x': ..."); callers prefix the option and path. */
#ifndef DDPBENCH_ATOMIC_FILE_H
#define DDPBENCH_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define AFILE_PATH_MAX 4096

typedef struct {
    char dir[AFILE_PATH_MAX];
    const char *base;          /* NAME within the path given */
    const char *path;          /* the path given (the caller keeps it alive) */
    char tmp[AFILE_PATH_MAX + 64];
    int fd;                    /* the temporary, -1 once closed */
    FILE *stream;              /* afile_stream's, or NULL */
    bool failed;               /* a write failed: commit refuses */
    int write_errno;
} afile_t;

/* Can path be written?  DDP_ERR_INPUT with the reason when its directory does
 * not exist or takes no new file, or when path is a directory.  Creates and
 * removes a temporary there, so a long run does not fail at its end for a
 * typo in a directory name. */
int afile_check(const char *path, char *err);

/* Create the temporary beside path (DDP_ERR_INPUT when the directory cannot
 * take it, DDP_ERR_RUNTIME otherwise). */
int afile_open(afile_t *a, const char *path, char *err);
/* Append n bytes; a failure is remembered and reported by afile_commit. */
void afile_write(afile_t *a, const void *buf, size_t n);
/* A stdio stream onto the temporary (for writers that print); NULL when out
 * of memory (then afile_commit fails). */
FILE *afile_stream(afile_t *a);
/* Flush, sync, close, (kill_before_rename: raise SIGKILL here, the fault
 * tests' crash between writing and renaming), rename over path, sync the
 * directory, remove dead writers' temporaries.  On any failure the temporary
 * is removed and the old file is left as it was. */
int afile_commit(afile_t *a, bool kill_before_rename, char *err);
/* Give up: close and remove the temporary. */
void afile_abort(afile_t *a);

#endif
