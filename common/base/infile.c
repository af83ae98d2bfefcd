/* common/base/infile.c: opening an input file without blocking (see infile.h). */
#include "common/base/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/status.h"

const char *file_kind_name(mode_t mode)
{
    static const struct {
        mode_t type;
        const char *name;
    } kinds[] = {{S_IFREG, "a regular file"},     {S_IFDIR, "a directory"},
                 {S_IFIFO, "a FIFO"},             {S_IFCHR, "a character device"},
                 {S_IFBLK, "a block device"},     {S_IFSOCK, "a socket"},
                 {S_IFLNK, "a symbolic link"}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((mode & S_IFMT) == kinds[i].type)
            return kinds[i].name;
    return "not a regular file";
}

static int infile_open(const char *path, int *fd, uint64_t *size, char *err)
{
    *fd = -1;
    *size = 0;
    /* O_NONBLOCK: a FIFO with no writer opens at once instead of waiting for
     * one; nothing is read before the check below. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0)
        return err_set(err, DDP_ERR_INPUT, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return err_set(err, DDP_ERR_INPUT, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return err_set(err, DDP_ERR_INPUT, "is %s, not a regular file", file_kind_name(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return err_set(err, DDP_ERR_INPUT, "cannot open: %s", strerror(e));
    }
    *fd = f;
    *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return DDP_OK;
}

int infile_fopen(const char *path, FILE **f, uint64_t *size, char *err)
{
    *f = NULL;
    int fd;
    TRY(infile_open(path, &fd, size, err));
    *f = fdopen(fd, "rb");
    if (!*f) {
        int e = errno;
        close(fd);
        return err_set(err, DDP_ERR_RUNTIME, "cannot open: %s", strerror(e));
    }
    return DDP_OK;
}

int infile_read(const char *path, size_t max, char **text, size_t *len, char *err)
{
    *text = NULL;
    *len = 0;
    FILE *f;
    uint64_t fsize;
    TRY(infile_fopen(path, &f, &fsize, err));
    int rc = DDP_OK;
    char *buf = NULL;
    if (fsize > max)
        rc = err_set(err, DDP_ERR_INPUT, "%llu bytes, over the limit of %zu",
                     (unsigned long long)fsize, max);
    else if (!(buf = malloc((size_t)fsize + 2)))
        rc = err_set(err, DDP_ERR_INPUT, "out of memory for %llu bytes",
                     (unsigned long long)fsize);
    /* a byte more than fstat said: a file that grew since is caught too */
    size_t got = buf ? fread(buf, 1, (size_t)fsize + 1, f) : 0;
    if (buf && ferror(f))
        rc = err_set(err, DDP_ERR_INPUT, "read error: %s", strerror(errno));
    else if (buf && got != fsize)
        rc = err_set(err, DDP_ERR_INPUT, "the file %s while reading it",
                     got < fsize ? "shrank" : "grew");
    fclose(f);
    if (rc != DDP_OK) {
        free(buf);
        return rc;
    }
    buf[got] = 0;
    *text = buf;
    *len = got;
    return DDP_OK;
}
