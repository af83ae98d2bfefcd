/* tests/fuzz/fuzz_util.h: what every fuzz target shares.  Define FUZZ_NAME
 * ("fuzz_npy") before including it, first among the target's own includes.
 *
 *   CHECK(cond)            a broken invariant: a message naming the target and
 *                          the line, then a trap (libFuzzer keeps the input)
 *   fuzz_check_err(err)    a failure left exactly one line in err
 *   fuzz_temp_path(...)    a per-process file path (in /dev/shm when it is
 *                          writable), removed when the process exits
 *   fuzz_write_bytes(...)  a whole file written, or a trap
 *
 * Built with -DFUZZ_STANDALONE (any C compiler, no libFuzzer) a target gets a
 * main() that replays the files named on its command line through
 * LLVMFuzzerTestOneInput, so any compiler can rerun a crash. */
#ifndef DDPBENCH_FUZZ_UTIL_H
#define DDPBENCH_FUZZ_UTIL_H

#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getpid */
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/status.h"

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz_util.h"
#endif

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, FUZZ_NAME ": invariant failed: %s (line %d)\n", #cond, __LINE__); \
            __builtin_trap();                                                                \
        }                                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void fuzz_check_err(const char *err)
{
    size_t n = strnlen(err, ERR_LEN);
    CHECK(n > 0 && n < ERR_LEN);
    CHECK(strchr(err, '\n') == NULL);
}

#define FUZZ_MAX_TEMPS 4
static struct {
    const char *suffix;
    char path[96];
} fuzz_temps[FUZZ_MAX_TEMPS];
static int fuzz_ntemps;

static void fuzz_remove_temps(void)
{
    for (int i = 0; i < fuzz_ntemps; i++)
        unlink(fuzz_temps[i].path);
}

/* "<dir>/<FUZZ_NAME>_<pid><suffix>": the same path for the same suffix (a
 * string literal) for the life of the process. */
static inline const char *fuzz_temp_path(const char *suffix)
{
    for (int i = 0; i < fuzz_ntemps; i++)
        if (strcmp(fuzz_temps[i].suffix, suffix) == 0)
            return fuzz_temps[i].path;
    CHECK(fuzz_ntemps < FUZZ_MAX_TEMPS);
    if (fuzz_ntemps == 0)
        atexit(fuzz_remove_temps);
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    fuzz_temps[fuzz_ntemps].suffix = suffix;
    char *p = fuzz_temps[fuzz_ntemps++].path;
    snprintf(p, sizeof fuzz_temps[0].path, "%s/%s_%ld%s", dir, FUZZ_NAME, (long)getpid(), suffix);
    return p;
}

static inline void fuzz_write_bytes(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (size)
        CHECK(fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
}

#ifdef FUZZ_STANDALONE
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        uint8_t *buf = NULL;
        size_t size = 0, cap = 0, got;
        do {
            if (size == cap) {
                cap = cap ? 2 * cap : 65536;
                uint8_t *nb = realloc(buf, cap);
                if (!nb) {
                    fprintf(stderr, "%s: out of memory\n", argv[i]);
                    return 1;
                }
                buf = nb;
            }
            got = fread(buf + size, 1, cap - size, f);
            size += got;
        } while (got > 0);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, size);
        free(buf);
        printf("%s: ok\n", argv[i]);
    }
    return 0;
}
#endif

#endif
