/* common/base/atomic_file.c: temporary, lock, sync, rename, directory sync,
 * and the checks on what may be replaced (see atomic_file.h). */
#include "common/base/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/base/fault.h"
#include "common/base/infile.h"
#include "common/base/procfile.h"
#include "common/base/status.h"

static int split_path(afile_t *a, const char *path, char *err)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->lock_fd = -1;
    a->path = path;
    const char *slash = strrchr(path, '/');
    a->base = slash ? slash + 1 : path;
    if (!*a->base)
        return err_set(err, DDP_ERR_INPUT, "names a directory, not a file");
    if (strlen(path) >= sizeof a->dir - 32)
        return err_set(err, DDP_ERR_INPUT, "the file name is too long");
    if (!slash)
        snprintf(a->dir, sizeof a->dir, ".");
    else if (slash == path)
        snprintf(a->dir, sizeof a->dir, "/");
    else
        snprintf(a->dir, sizeof a->dir, "%.*s", (int)(slash - path), path);
    return DDP_OK;
}

static bool creation_is_users_fault(int e)
{
    return e == ENOENT || e == ENOTDIR || e == EACCES || e == EPERM || e == EROFS ||
           e == ENAMETOOLONG || e == ELOOP || e == EISDIR;
}

// ---------------------------------------------------------------------------
// what may be replaced

/* CAP_FOWNER in the effective set: it lets a process replace other users'
 * files in a sticky directory.  Root is assumed to hold it without /proc. */
static bool has_cap_fowner(void)
{
    char v[64];
    if (!procfile_value("/proc/self/status", "CapEff:", v, sizeof v))
        return geteuid() == 0;
    return (strtoull(v, NULL, 16) >> 3) & 1; /* CAP_FOWNER is capability 3 */
}

/* Would rename(temporary, path) be refused for an existing regular file st?
 * Beyond write access to the directory: the sticky bit, immutable, append-only. */
static int rename_allowed(const afile_t *a, const struct stat *st, char *err)
{
    struct stat dst;
    if (stat(a->dir, &dst) == 0 && (dst.st_mode & S_ISVTX)) {
        uid_t me = geteuid();
        if (st->st_uid != me && dst.st_uid != me && !has_cap_fowner())
            return err_set(err, DDP_ERR_INPUT,
                           "belongs to another user (uid %ld) in the sticky directory '%s', so "
                           "it cannot be replaced (remove it, or write elsewhere)",
                           (long)st->st_uid, a->dir);
    }
    int fd = open(a->path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
        int flags = 0;
        bool fixed = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                     (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL));
        close(fd);
        if (fixed)
            return err_set(err, DDP_ERR_INPUT,
                           "is marked %s (chattr), so it cannot be replaced",
                           (flags & FS_IMMUTABLE_FL) ? "immutable" : "append-only");
    }
    return DDP_OK;
}

/* NAME must be absent or a regular file that the rename may replace. */
static int target_allowed(const afile_t *a, bool check_rename, char *err)
{
    struct stat st;
    if (lstat(a->path, &st) != 0)
        return DDP_OK; /* absent (or unreachable: creating the temporary says why) */
    if (S_ISLNK(st.st_mode))
        return err_set(err, DDP_ERR_INPUT,
                       "is a symbolic link; ddpbench replaces its outputs by renaming a new "
                       "file over them and will not replace a link (name the file it points to)");
    if (!S_ISREG(st.st_mode))
        return err_set(err, DDP_ERR_INPUT,
                       "is %s, not a regular file; ddpbench replaces its outputs by renaming a "
                       "new file over them and will not replace one",
                       file_kind_name(st.st_mode));
    return check_rename ? rename_allowed(a, &st, err) : DDP_OK;
}

// ---------------------------------------------------------------------------
// the temporary

/* A file that replaces one keeps its permissions (a private 0600 checkpoint
 * must not become 0644), and its owner and group where the process may; set
 * on the empty temporary, the owner first (a chown may clear set-id bits).
 * Neither failing stops the write (vfat keeps no modes). */
static void keep_mode(const afile_t *a, int fd)
{
    struct stat st;
    if (lstat(a->path, &st) != 0 || !S_ISREG(st.st_mode))
        return; /* a new file: the mode any new file gets */
    if (fchown(fd, st.st_uid, st.st_gid) != 0 && fchown(fd, (uid_t)-1, st.st_gid) != 0) {
        /* neither: the new file is the writer's, in its group */
    }
    if (fchmod(fd, st.st_mode & 07777) != 0) {
        /* a file system without modes */
    }
}

/* Create ".BASE.new.PID.XXXXXX" with O_EXCL and mode 0666 (mkstemp's 0600
 * would hide checkpoints from the user's group), lock it, and only then give
 * it its ".tmp." name: a ".tmp." name is locked for as long as its writer
 * lives, so a cleaner that can take the lock knows the writer is dead. */
static int temp_open(afile_t *a, char *err)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL;
    char inc[AFILE_PATH_MAX + 64];
    int e = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x ^= (uint64_t)ts.tv_nsec + ((uint64_t)ts.tv_sec << 30) + (uint64_t)attempt;
        x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
        char suffix[7];
        for (int i = 0; i < 6; i++)
            suffix[i] = abc[(x >> (6 * i)) % (sizeof abc - 1)];
        suffix[6] = 0;
        snprintf(inc, sizeof inc, "%s/.%s.new.%ld.%s", a->dir, a->base, (long)getpid(), suffix);
        snprintf(a->tmp, sizeof a->tmp, "%s/.%s.tmp.%ld.%s", a->dir, a->base, (long)getpid(),
                 suffix);
        a->fd = open(inc, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (a->fd < 0) {
            e = errno;
            if (e == EEXIST)
                continue;
            break;
        }
        /* A file system without locks (ENOLCK, EOPNOTSUPP) still gets the
         * file; cleaners there cannot take a lock either, so they keep it. */
        while (flock(a->fd, LOCK_EX) != 0 && errno == EINTR)
            ;
        keep_mode(a, a->fd);
        if (link(inc, a->tmp) == 0) {
            unlink(inc);
            return DDP_OK;
        }
        e = errno;
        if (e != EEXIST && rename(inc, a->tmp) == 0) /* no hard links here */
            return DDP_OK;
        unlink(inc);
        close(a->fd);
        a->fd = -1;
        if (e != EEXIST)
            break;
    }
    a->tmp[0] = 0;
    return err_set(err, creation_is_users_fault(e) ? DDP_ERR_INPUT : DDP_ERR_RUNTIME,
                   "cannot create a file in directory '%s': %s", a->dir, strerror(e));
}

/* Is name exactly what temp_open makes for base with the word kind ("tmp"
 * or "new"): "." base "." kind "." PID (1 to 10 digits, no leading zero) "."
 * six letters or digits?  A user's ".w.st.tmp.notes" is never touched. */
static bool is_our_temp(const char *name, const char *base, const char *kind)
{
    char pre[AFILE_PATH_MAX + 16], pid[12], tail[8];
    int n = snprintf(pre, sizeof pre, ".%s.%s.", base, kind), end = 0;
    if (strncmp(name, pre, (size_t)n) != 0 || name[n] == '0')
        return false;
    return sscanf(name + n, "%11[0-9].%7[A-Za-z0-9]%n", pid, tail, &end) == 2 &&
           strlen(pid) <= 10 && strlen(tail) == 6 && name[n + end] == 0;
}

/* Remove our temporaries (".new." ones only a minute old) whose lock can be
 * taken: their writers are gone.  A file whose lock cannot even be tried is
 * kept, as is anything not a regular file or that changed name under us. */
static void remove_stale_temps(const afile_t *a)
{
    DIR *d = opendir(a->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        bool is_tmp = is_our_temp(e->d_name, a->base, "tmp");
        bool is_new = !is_tmp && is_our_temp(e->d_name, a->base, "new");
        if (!is_tmp && !is_new)
            continue;
        int fd = openat(dirfd(d), e->d_name,
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st, now;
        bool dead = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (dead && is_new)
            dead = time(NULL) - st.st_mtime > AFILE_NEW_STALE_S;
        /* still the same file under that name: unlink what we proved dead */
        if (dead && fstatat(dirfd(d), e->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            now.st_dev == st.st_dev && now.st_ino == st.st_ino)
            unlinkat(dirfd(d), e->d_name, 0);
        close(fd); /* releases the lock */
    }
    closedir(d);
}

// ---------------------------------------------------------------------------
// the public functions

int afile_check(const char *path, char *err)
{
    afile_t a;
    int rc = split_path(&a, path, err);
    if (rc == DDP_OK)
        rc = target_allowed(&a, true, err);
    if (rc == DDP_OK && (rc = temp_open(&a, err)) == DDP_OK) {
        unlink(a.tmp);
        close(a.fd);
    }
    return rc;
}

/* One not yet there: the same name in folders of the same device and inode
 * (a bind mount shows one folder under two paths that realpath keeps apart).
 * The splits are on the heap: paths of PATH_MAX do not belong on the stack. */
bool afile_same_file(const char *x, const char *y)
{
    struct stat sx, sy;
    if (stat(x, &sx) == 0 && stat(y, &sy) == 0)
        return sx.st_dev == sy.st_dev && sx.st_ino == sy.st_ino;
    afile_t *a = malloc(2 * sizeof *a);
    bool same = strcmp(x, y) == 0;
    if (a && split_path(&a[0], x, NULL) == DDP_OK && split_path(&a[1], y, NULL) == DDP_OK &&
        stat(a[0].dir, &sx) == 0 && stat(a[1].dir, &sy) == 0)
        same = sx.st_dev == sy.st_dev && sx.st_ino == sy.st_ino &&
               strcmp(a[0].base, a[1].base) == 0;
    free(a);
    return same;
}

int afile_open(afile_t *a, const char *path, char *err)
{
    int rc = split_path(a, path, err);
    if (rc == DDP_OK)
        rc = target_allowed(a, false, err);
    return rc == DDP_OK ? temp_open(a, err) : rc;
}

void afile_write(afile_t *a, const void *buf, size_t n)
{
    const char *p = buf;
    while (n && !a->failed) {
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(a->fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            a->failed = true;
            a->write_errno = errno;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

FILE *afile_stream(afile_t *a)
{
    if (!a->stream && a->fd >= 0 && !a->failed) {
        a->stream = fdopen(a->fd, "w");
        if (!a->stream) {
            a->failed = true;
            a->write_errno = errno;
        }
    }
    return a->stream;
}

/* Close the temporary; false (errno set) when a buffered write or the close failed. */
static bool close_temp(afile_t *a)
{
    bool ok = true;
    if (a->stream) {
        ok = fclose(a->stream) == 0;
        a->stream = NULL;
        a->fd = -1;
    } else if (a->fd >= 0) {
        ok = close(a->fd) == 0;
        a->fd = -1;
    }
    return ok;
}

void afile_abort(afile_t *a)
{
    /* Unlink first, while the lock still says the file is ours. */
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = 0;
    close_temp(a);
    if (a->lock_fd >= 0)
        close(a->lock_fd);
    a->lock_fd = -1;
}

/* Flush, sync and close the temporary, keeping its lock in a->lock_fd.  On
 * a failure the temporary is removed. */
static int seal(afile_t *a, char *err)
{
    int e = a->write_errno;
    bool ok = !a->failed;
    if (ok && a->stream && (fflush(a->stream) != 0 || ferror(a->stream))) {
        ok = false;
        e = errno;
    }
    /* fsync before the rename: otherwise a crash of the machine could leave
     * the new name pointing at data that never reached the disk. */
    if (ok && fsync(a->stream ? fileno(a->stream) : a->fd) != 0) {
        ok = false;
        e = errno;
    }
    /* The lock must outlive the close (whose error counts: NFS reports
     * write errors there) until the rename is done: a second descriptor of
     * the same open file keeps it. */
    a->lock_fd = ok ? fcntl(a->stream ? fileno(a->stream) : a->fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (ok && a->lock_fd < 0) {
        ok = false;
        e = errno;
    }
    if (!close_temp(a) && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        err_set(err, DDP_ERR_RUNTIME, "writing %s: %s%s", a->tmp, strerror(e),
                e == EFBIG ? " (over the file size limit: ulimit -f)" : "");
        afile_abort(a);
        return DDP_ERR_RUNTIME;
    }
    return DDP_OK;
}

/* The rename lives in the directory: sync it so the new name survives a crash. */
static int sync_dir(const afile_t *a, char *err)
{
    int dfd = open(a->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int bad = fsync(dfd) != 0 && errno != EINVAL && errno != EROFS;
        int e = errno;
        close(dfd);
        if (bad)
            return err_set(err, DDP_ERR_RUNTIME, "syncing directory '%s': %s", a->dir,
                           strerror(e));
    }
    return DDP_OK;
}

static int rename_error(int e, char *err)
{
    return err_set(err, e == EISDIR ? DDP_ERR_INPUT : DDP_ERR_RUNTIME,
                   "cannot rename the temporary to it: %s", strerror(e));
}

int afile_commit(afile_t *a, bool kill_before_rename, char *err)
{
    TRY(seal(a, err));
    if (kill_before_rename)
        raise(SIGKILL); /* injected: the complete temporary stays, the old file too */
    if (fault_pause_take()) /* injected: a slow disk, a signal lands in the write */
        sleep(FAULT_PAUSE_S);
    /* What is at NAME now may have changed since the run began. */
    int rc = target_allowed(a, false, err);
    if (rc == DDP_OK && rename(a->tmp, a->path) != 0)
        rc = rename_error(errno, err);
    if (rc != DDP_OK) {
        afile_abort(a);
        return rc;
    }
    a->tmp[0] = 0;
    close(a->lock_fd);
    a->lock_fd = -1;
    TRY(sync_dir(a, err));
    remove_stale_temps(a);
    return DDP_OK;
}

/* How each file of a set went in (afile_commit_set). */
enum { SET_WAITING, SET_NEW, SET_SWAPPED, SET_REPLACED };

int afile_commit_set(afile_t *a, int n, char *err)
{
    int rc = DDP_OK, how[16];
    if (n > (int)(sizeof how / sizeof *how))
        return err_set(err, DDP_ERR_RUNTIME, "afile_commit_set: %d files, at most 16", n);
    int bad = -1; /* the file a failure is about */
    for (int i = 0; i < n && rc == DDP_OK; i++)
        if ((rc = seal(&a[i], err)) != DDP_OK)
            bad = i;
    for (int i = 0; i < n; i++)
        how[i] = SET_WAITING;
    for (int i = 0; i < n && rc == DDP_OK; i++) {
        struct stat st;
        if ((rc = target_allowed(&a[i], false, err)) != DDP_OK) {
            bad = i;
            break;
        }
        bool exists = lstat(a[i].path, &st) == 0;
        /* Exchange, not replace: the old file stays whole under the
         * temporary's name until the whole set is in, so a failure at a
         * later file can put it back. */
        if (exists && renameat2(AT_FDCWD, a[i].tmp, AT_FDCWD, a[i].path, RENAME_EXCHANGE) == 0) {
            how[i] = SET_SWAPPED;
            continue;
        }
        if (exists && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
            rc = rename_error(errno, err);
            bad = i;
            break;
        }
        if (rename(a[i].tmp, a[i].path) != 0) {
            rc = rename_error(errno, err);
            bad = i;
            break;
        }
        how[i] = exists ? SET_REPLACED : SET_NEW;
    }
    if (rc != DDP_OK) {
        /* Back to the old set, last renamed first: swap the old files back,
         * remove the new ones that had no old file. */
        for (int i = n - 1; i >= 0; i--) {
            if (how[i] == SET_SWAPPED &&
                renameat2(AT_FDCWD, a[i].tmp, AT_FDCWD, a[i].path, RENAME_EXCHANGE) != 0)
                a[i].tmp[0] = 0; /* the old file stays under the temporary's name: keep it */
            else if (how[i] == SET_NEW && unlink(a[i].path) == 0)
                a[i].tmp[0] = 0;
            else if (how[i] == SET_REPLACED)
                a[i].tmp[0] = 0; /* nothing left to remove */
            afile_abort(&a[i]); /* removes the new file still under its temporary's name */
        }
        /* name the file at fault first */
        if (bad >= 0)
            err_prefix(err, rc, "%s", a[bad].path);
        return rc;
    }
    /* The whole set is in: the old files (under the temporaries' names) go. */
    for (int i = 0; i < n; i++) {
        if (how[i] == SET_SWAPPED)
            unlink(a[i].tmp);
        a[i].tmp[0] = 0;
        close(a[i].lock_fd);
        a[i].lock_fd = -1;
    }
    for (int i = 0; i < n && rc == DDP_OK; i++)
        if (i == 0 || strcmp(a[i].dir, a[i - 1].dir) != 0)
            rc = sync_dir(&a[i], err);
    for (int i = 0; i < n; i++)
        remove_stale_temps(&a[i]);
    return rc;
}
