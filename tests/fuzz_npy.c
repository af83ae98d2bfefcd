/* tests/fuzz_npy.c: libFuzzer target for the .npy reader (common/data_npy.c).
 *
 * Each input is taken as a whole .npy file and goes through:
 *  1. npy_parse_header from memory, with the true file size and with a file
 *     claimed larger than the bytes at hand; a success must describe exactly
 *     the bytes there are, a failure must leave one line in err;
 *  2. data_load_npy on the input written to a per-process temp file, as both
 *     features and targets (so the rows agree), with and without labels;
 *  3. when it parses as 1-D or 2-D with few rows, as targets beside a matching
 *     float32 features file, so integer targets and labels are decoded too.
 * Any broken invariant traps.  Build and run (see the report / Makefile):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Icommon tests/fuzz_npy.c \
 *       common/data_npy.c common/status.c common/data.c common/rng.c common/kinds.c -lm \
 *       -o build/fuzz_npy
 *   build/fuzz_npy -max_total_time=60 -max_len=4096 CORPUS_DIR
 * Useful dictionary tokens: "\x93NUMPY" "'descr'" "'fortran_order'" "'shape'"
 * "'<f4'" "'<f8'" "'<i4'" "'<i8'" "True" "False".
 * Built with -DFUZZ_STANDALONE (any C compiler, no libFuzzer) it replays the
 * files named on its command line instead. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getpid */
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"
#include "data/npy.h"
#include "base/status.h"

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_npy: invariant failed: %s (line %d)\n", #cond, __LINE__); \
            __builtin_trap();                                                                \
        }                                                                                    \
    } while (0)

// ----------------------------------------------------------------------------
// temp files, made once per process

static char input_path[64], feat_path[64];

static void remove_temp_files(void)
{
    unlink(input_path);
    unlink(feat_path);
}

static void temp_paths_init(void)
{
    if (input_path[0])
        return;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(input_path, sizeof input_path, "%s/fuzz_npy_%ld.npy", dir, (long)getpid());
    snprintf(feat_path, sizeof feat_path, "%s/fuzz_npy_%ld_x.npy", dir, (long)getpid());
    atexit(remove_temp_files);
}

static void write_bytes(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (size)
        CHECK(fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
}

/* A float32 features file of rows zeros, shape (rows,). */
static void write_features(size_t rows)
{
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }",
                     rows);
    size_t hlen = (size_t)n + 1;
    hlen += (64 - (10 + hlen) % 64) % 64;
    size_t total = 10 + hlen + rows * 4;
    uint8_t *b = calloc(total, 1);
    CHECK(b != NULL);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(hlen & 0xff);
    b[9] = (uint8_t)(hlen >> 8);
    memset(b + 10, ' ', hlen);
    memcpy(b + 10, dict, (size_t)n);
    b[10 + hlen - 1] = '\n';
    write_bytes(feat_path, b, total);
    free(b);
}

// ----------------------------------------------------------------------------
// checks

static void check_err(const char *err)
{
    size_t n = strnlen(err, ERR_LEN);
    CHECK(n > 0 && n < ERR_LEN);
    CHECK(strchr(err, '\n') == NULL);
}

static void check_load(int rc, const dataset_t *d, const char *err)
{
    if (rc != DDP_OK) {
        CHECK(rc == DDP_ERR_INPUT);
        check_err(err);
        CHECK(d->x == NULL && d->y == NULL && d->n == 0 && d->in_dim == 0 && d->tgt_cols == 0);
        return;
    }
    CHECK(d->n > 0 && d->in_dim > 0 && d->tgt_cols > 0 && d->x && d->y);
    if (d->labels) {
        CHECK(d->tgt_cols == 1);
        for (size_t i = 0; i < d->n; i++)
            CHECK(d->y[i] >= 0 && d->y[i] <= 16777216.0f && d->y[i] == floorf(d->y[i]));
    }
}

static void load_and_check(const char *x, const char *y, bool labels)
{
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_npy(&d, x, y, labels, err);
    check_load(rc, &d, err);
    if (rc == DDP_OK)
        data_free(&d);
}

// ----------------------------------------------------------------------------
// the target

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    temp_paths_init();

    /* 1. the header parser from memory */
    npy_info_t info;
    char err[ERR_LEN] = "";
    size_t len = size < NPY_PREAMBLE_MAX + NPY_HEADER_MAX ? size : NPY_PREAMBLE_MAX + NPY_HEADER_MAX;
    int rc = npy_parse_header(data, len, size, &info, err);
    if (rc == DDP_OK) {
        CHECK(info.ndim >= 0 && info.ndim <= NPY_MAX_DIMS);
        CHECK(info.elem_size == 4 || info.elem_size == 8);
        CHECK(info.data_offset + info.data_bytes == size);
        CHECK(info.data_bytes == info.count * info.elem_size);
        char shape[96];
        npy_shape_str(&info, shape, sizeof shape);
        CHECK(shape[0] == '(' && strlen(shape) < sizeof shape);
    } else {
        CHECK(rc == DDP_ERR_INPUT);
        check_err(err);
    }
    npy_info_t info2;
    err[0] = '\0';
    int rc2 = npy_parse_header(data, len, size + 4096, &info2, err); /* more file than bytes */
    if (rc2 != DDP_OK)
        check_err(err);
    else
        CHECK(info2.data_offset + info2.data_bytes == size + 4096);

    /* 2. the whole loader, the input as features and targets */
    write_bytes(input_path, data, size);
    load_and_check(input_path, input_path, false);
    load_and_check(input_path, input_path, true);

    /* 3. as targets beside features with the same rows */
    if (rc == DDP_OK && (info.ndim == 1 || info.ndim == 2) && info.shape[0] > 0 &&
        info.shape[0] <= 4096) {
        write_features((size_t)info.shape[0]);
        load_and_check(feat_path, input_path, false);
        load_and_check(feat_path, input_path, true);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// replay without libFuzzer: fuzz_npy FILE...

#include "fuzz_replay.h"
