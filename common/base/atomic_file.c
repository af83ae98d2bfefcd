/* common/base/atomic_file.c: temporary, sync, rename, directory sync (see
 * atomic_file.h). */
#include "base/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"

static int split_path(afile_t *a, const char *path, char *err)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
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

/* Create ".BASE.tmp.PID.XXXXXX" in the directory with O_EXCL and mode 0666:
 * the umask then gives the file the mode any new file gets (mkstemp's 0600
 * would make checkpoints unreadable to the user's group). */
static int temp_open(afile_t *a, char *err)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL;
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x ^= (uint64_t)ts.tv_nsec + ((uint64_t)ts.tv_sec << 30) + (uint64_t)attempt;
        x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
        char suffix[7];
        for (int i = 0; i < 6; i++)
            suffix[i] = abc[(x >> (6 * i)) % (sizeof abc - 1)];
        suffix[6] = 0;
        snprintf(a->tmp, sizeof a->tmp, "%s/.%s.tmp.%ld.%s", a->dir, a->base, (long)getpid(),
                 suffix);
        a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (a->fd >= 0)
            return DDP_OK;
        if (errno != EEXIST)
            break;
    }
    int e = errno;
    return err_set(err, creation_is_users_fault(e) ? DDP_ERR_INPUT : DDP_ERR_RUNTIME,
                   "cannot create a file in directory '%s': %s", a->dir, strerror(e));
}

/* Remove ".BASE.tmp.PID.*" files left by writers that died before their rename
 * (a live writer's file is kept: its process still exists). */
static void remove_stale_temps(const afile_t *a)
{
    DIR *d = opendir(a->dir);
    if (!d)
        return;
    char prefix[AFILE_PATH_MAX + 16];
    int plen = snprintf(prefix, sizeof prefix, ".%s.tmp.", a->base);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0)
            continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || *end != '.' || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == -1 && errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

int afile_check(const char *path, char *err)
{
    afile_t a;
    int rc = split_path(&a, path, err);
    if (rc != DDP_OK)
        return rc;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return err_set(err, DDP_ERR_INPUT, "is a directory");
    if ((rc = temp_open(&a, err)) != DDP_OK)
        return rc;
    close(a.fd);
    unlink(a.tmp);
    return DDP_OK;
}

int afile_open(afile_t *a, const char *path, char *err)
{
    int rc = split_path(a, path, err);
    if (rc != DDP_OK)
        return rc;
    return temp_open(a, err);
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
    close_temp(a);
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = 0;
}

int afile_commit(afile_t *a, bool kill_before_rename, char *err)
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
    if (!close_temp(a) && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        err_set(err, DDP_ERR_RUNTIME, "writing %s: %s", a->tmp, strerror(e));
        afile_abort(a);
        return DDP_ERR_RUNTIME;
    }
    if (kill_before_rename)
        raise(SIGKILL); /* injected: the complete temporary stays, the old file too */
    if (rename(a->tmp, a->path) != 0) {
        e = errno;
        afile_abort(a);
        return err_set(err, e == EISDIR ? DDP_ERR_INPUT : DDP_ERR_RUNTIME,
                       "cannot rename the temporary to it: %s", strerror(e));
    }
    a->tmp[0] = 0;
    /* The rename lives in the directory: sync it so the new name survives a crash. */
    int dfd = open(a->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int bad = fsync(dfd) != 0 && errno != EINVAL && errno != EROFS;
        e = errno;
        close(dfd);
        if (bad)
            return err_set(err, DDP_ERR_RUNTIME, "syncing directory '%s': %s", a->dir,
                           strerror(e));
    }
    remove_stale_temps(a);
    return DDP_OK;
}
