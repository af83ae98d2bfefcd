/* common/base/atomic_file.h: writing an output file so that it is either the
 * old file or the whole new one, never half of either.
 *
 * Every output ddpbench writes (--save, --checkpoint, --trace) goes through
 * here: the data goes to ".NAME.tmp.PID.XXXXXX" in NAME's directory, is
 * synced, and is renamed over NAME; then the directory is synced so the new
 * name survives a crash.  New files get the usual mode (0666 less the umask);
 * a file replaced keeps its mode, and its owner and group where the process
 * may (root: any; another user: a group of theirs).
 *
 * What may be replaced: NAME must not exist, or be a regular file.  A
 * symbolic link, a device (/dev/null), a FIFO, a socket or a directory at
 * NAME is refused (DDP_ERR_INPUT): renaming over it would replace the link or
 * the device node itself.  afile_check() also proves up front that the final
 * rename will be allowed: a file of another user in a sticky directory such
 * as /tmp, or an immutable or append-only file, cannot be replaced, and a run
 * must not learn that after training.
 *
 * Dead writers' temporaries: a writer holds an flock(2) on its temporary from
 * before the temporary has its ".tmp." name until after the rename (it is
 * created as ".NAME.new.PID.XXXXXX", locked, then linked to its ".tmp." name).
 * A lock is proof of life that holds across PID namespaces and containers
 * sharing a volume, where a PID proves nothing; so after a successful write
 * the temporaries of NAME are removed only when their lock can be taken (the
 * writer is gone), and a ".new." name only once it is also a minute old.  A
 * temporary whose lock cannot be tried (a file system without locks) is kept.
 * Only names of exactly that pattern (PID digits, six letters or digits) are
 * considered: a user's ".NAME.tmp.notes" is not a temporary of ours.
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
    int lock_fd;               /* afile_seal's: holds the lock until published */
} afile_t;

/* Can path be written and then renamed into place?  DDP_ERR_INPUT with the
 * reason when its directory does not exist or takes no new file, when path
 * is not a regular file (see above), or when the rename over it would be
 * refused.  Creates and removes a temporary there, so a long run does not
 * fail at its end for a typo in a directory name. */
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
/* Flush, sync, close, (kill_before_rename: raise SIGKILL here, the fault
 * tests' crash between writing and renaming), check path is still a regular
 * file or absent, rename over it, sync the directory, remove dead writers'
 * temporaries.  On any failure the temporary is removed and the old file is
 * left as it was. */
int afile_commit(afile_t *a, bool kill_before_rename, char *err);
/* Give up: close and remove the temporary. */
void afile_abort(afile_t *a);

/* Several files committed as one (--emit-pytorch's set): each a[i] opened
 * and written as above; then every temporary is flushed and synced, and
 * only when all of them are complete are they renamed into place, in the
 * order given (put the file that makes the set usable last).  A file that
 * exists is swapped with its temporary (renameat2 RENAME_EXCHANGE), so the
 * old file stays whole under the temporary's name until the whole set is
 * in; a failure at any rename swaps every earlier file back (and removes
 * the ones that did not exist), so a failure leaves the old set or the
 * whole new one.  Then the old files are removed and the directories
 * synced.  What a crash of the machine or a SIGKILL between two renames
 * leaves: the files renamed so far new, the rest old, the old ones that
 * were swapped out under their ".NAME.tmp.PID.XXXXXX" names (which the next
 * write of that NAME removes).  On a file system without RENAME_EXCHANGE
 * (NFS before 4.x servers, some FUSE) a plain rename is used and the files
 * renamed before a failure stay new.  On a failure every temporary is
 * removed and err names the file (its path, then the reason). */
int afile_commit_set(afile_t *a, int n, char *err);

#endif
