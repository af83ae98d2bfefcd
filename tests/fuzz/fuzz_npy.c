/* tests/fuzz/fuzz_npy.c: libFuzzer target for the .npy reader (app/load/data_npy.c).
 *
 * Each input is taken as a whole .npy file and goes through:
 *  1. npy_parse_header from memory, with the true file size and with a file
 *     claimed larger than the bytes at hand; a success must describe exactly
 *     the bytes there are, a failure must leave one line in err;
 *  2. data_load_npy on the input written to a per-process temp file, as both
 *     features and targets (so the rows agree), with and without labels;
 *  3. when it parses as 1-D or 2-D with few rows, as targets beside a matching
 *     float32 features file, so integer targets and labels are decoded too.
 * Any broken invariant traps.  `make test-fuzz` builds and runs it (20 s)
 * with the seeds in tests/fuzz/corpus/fuzz_npy/; `make fuzz` for 10 minutes.
 * Built with -DFUZZ_STANDALONE (any C compiler, no libFuzzer) it replays the
 * files named on its command line instead. */
#define FUZZ_NAME "fuzz_npy"
#include "fuzz_util.h"

#include <math.h>

#include "app/load/load.h"
#include "app/load/npy.h"

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
    fuzz_write_bytes(fuzz_temp_path("_x.npy"), b, total);
    free(b);
}

// ----------------------------------------------------------------------------
// checks

static void check_load(int rc, const dataset_t *d, const char *err)
{
    if (rc != DDP_OK) {
        CHECK(rc == DDP_ERR_INPUT);
        fuzz_check_err(err);
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
        fuzz_check_err(err);
    }
    npy_info_t info2;
    err[0] = '\0';
    int rc2 = npy_parse_header(data, len, size + 4096, &info2, err); /* more file than bytes */
    if (rc2 != DDP_OK)
        fuzz_check_err(err);
    else
        CHECK(info2.data_offset + info2.data_bytes == size + 4096);

    /* 2. the whole loader, the input as features and targets */
    fuzz_write_bytes(fuzz_temp_path(".npy"), data, size);
    load_and_check(fuzz_temp_path(".npy"), fuzz_temp_path(".npy"), false);
    load_and_check(fuzz_temp_path(".npy"), fuzz_temp_path(".npy"), true);

    /* 3. as targets beside features with the same rows */
    if (rc == DDP_OK && (info.ndim == 1 || info.ndim == 2) && info.shape[0] > 0 &&
        info.shape[0] <= 4096) {
        write_features((size_t)info.shape[0]);
        load_and_check(fuzz_temp_path("_x.npy"), fuzz_temp_path(".npy"), false);
        load_and_check(fuzz_temp_path("_x.npy"), fuzz_temp_path(".npy"), true);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// replay without libFuzzer: fuzz_npy FILE...
