/* tests/unit/tmpdir.h: a fresh temporary directory per test for suites that write
 * fixture files, removed with its files (one level deep) afterwards. */
#ifndef DDPBENCH_TMPDIR_H
#define DDPBENCH_TMPDIR_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_dir[64];

/* Create /tmp/<prefix>_XXXXXX as tmp_dir (a failed mkdtemp fails the test). */
static inline void tmpdir_make(const char *prefix)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/%s_XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(tmp_dir), "mkdtemp failed");
}

static inline void tmpdir_remove(void)
{
    DIR *dir = opendir(tmp_dir);
    if (!dir)
        return;
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    closedir(dir);
    rmdir(tmp_dir);
}

#endif
