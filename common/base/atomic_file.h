/* common/base/atomic_file.h: writing an output file so that it is either the
 * old file or the whole new one, never half of either (--save, --checkpoint,
 * --trace, --emit-pytorch's set).  What may be replaced, the temporaries'
 * names, locks and clean-up: docs/checkpoints.md.  Messages are about the
 * file alone; callers prefix the option and path. */
#ifndef DDPBENCH_ATOMIC_FILE_H
#define DDPBENCH_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define AFILE_PATH_MAX 4096
/* A ".new." name older than this whose lock can be taken is a dead writer's. */
#define AFILE_NEW_STALE_S 60

typedef struct {
    char dir[AFILE_PATH_MAX];
    const char *base;          /* NAME within the path given */
    const char *path;          /* the path given (the caller keeps it alive) */
    char tmp[AFILE_PATH_MAX + 64];
    int fd;                    /* the temporary, -1 once closed */
    FILE *stream;              /* afile_stream's, or NULL */
    bool failed;               /* a write failed: commit refuses */
    int write_errno;
    int lock_fd;               /* seal's: holds the lock until published */
} afile_t;

/* Can path be written and renamed into place (DDP_ERR_INPUT with the reason
 * if not)?  Creates and removes a temporary there, before the run. */
int afile_check(const char *path, char *err);

/* Do a and b name the same file?  By device and inode when both exist,
 * else by the name within a folder of the same device and inode. */
bool afile_same_file(const char *a, const char *b);

/* Create the locked temporary beside path (DDP_ERR_INPUT when the directory
 * cannot take it, DDP_ERR_RUNTIME otherwise). */
int afile_open(afile_t *a, const char *path, char *err);
/* Append n bytes; a failure is remembered and reported by afile_commit. */
void afile_write(afile_t *a, const void *buf, size_t n);
/* A stdio stream onto the temporary (for writers that print); NULL when out
 * of memory (then afile_commit fails). */
FILE *afile_stream(afile_t *a);
/* Sync, close, rename over path, sync the directory, remove dead writers'
 * temporaries (kill_before_rename: SIGKILL just before the rename, the fault
 * tests').  On any failure the temporary is removed, the old file left. */
int afile_commit(afile_t *a, bool kill_before_rename, char *err);
/* Give up: close and remove the temporary. */
void afile_abort(afile_t *a);

/* Several files committed as one (--emit-pytorch's set, docs/checkpoints.md):
 * each a[i] opened and written as above; all are synced, then renamed in the
 * order given (the file that makes the set usable last), an existing file
 * swapped with its temporary so that a failure can swap it back.  On a
 * failure every temporary is removed and err names the file. */
int afile_commit_set(afile_t *a, int n, char *err);

#endif
