/* tests/unit/test_loaders.c: Criterion suite for the file loaders, data_load_npy
 * (app/load/data_npy.c) and data_load_csv (app/load/data_csv.c).
 *
 * Every test writes its fixtures into a fresh mkdtemp directory: .npy files are
 * assembled byte by byte here (magic, version, header padded with spaces to a
 * multiple of 64 and ended by '\n', then the data), CSV files as text.  Good
 * files must round-trip exactly; each malformed one must fail with
 * DDP_ERR_INPUT, leave the dataset zeroed, and say what is wrong, naming the
 * file. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* mkdtemp, ftruncate */
#endif

#include <criterion/criterion.h>
#include <dirent.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/load/load.h"
#include "app/load/npy.h"
#include "common/base/status.h"
#include "tmpdir.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the fixtures are written with memcpy and assume a little-endian host"
#endif

// ----------------------------------------------------------------------------
// fixtures: a temp dir per test, files in it

static void dir_setup(void) { tmpdir_make("ddp_loaders"); }
static void dir_teardown(void) { tmpdir_remove(); }

TestSuite(npy, .init = dir_setup, .fini = dir_teardown);
TestSuite(csv, .init = dir_setup, .fini = dir_teardown);

/* dir/name, in one of four rotating buffers (a test needs x and y at once). */
static const char *path_of(const char *name)
{
    static char bufs[4][PATH_MAX];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", tmp_dir, name);
    return b;
}

static const char *write_file(const char *name, const void *data, size_t len)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "cannot create %s", p);
    if (len)
        cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    return p;
}

static const char *write_text(const char *name, const char *text)
{
    return write_file(name, text, strlen(text));
}

/* A .npy file with the header dict text given verbatim.  The header is padded
 * with spaces and a final '\n' so the data starts at a multiple of 64, like
 * numpy writes it. */
static const char *write_npy_dict(const char *name, int major, const char *dict, const void *data,
                                  size_t len)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t hlen = strlen(dict) + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    size_t total = pre + hlen + len;
    uint8_t *b = malloc(total);
    cr_assert_not_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    if (major == 1) {
        b[8] = (uint8_t)(hlen & 0xff);
        b[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++)
            b[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, strlen(dict));
    b[pre + hlen - 1] = '\n';
    if (len)
        memcpy(b + pre + hlen, data, len);
    const char *p = write_file(name, b, total);
    free(b);
    return p;
}

/* The dict numpy itself writes: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), } */
static const char *write_npy(const char *name, int major, const char *descr, bool fortran,
                             const char *shape, const void *data, size_t len)
{
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
             fortran ? "True" : "False", shape);
    return write_npy_dict(name, major, dict, data, len);
}

/* A header-only .npy file grown (sparse) to hold data_bytes of data. */
static const char *write_npy_sparse(const char *name, const char *descr, const char *shape,
                                    uint64_t data_bytes)
{
    const char *p = write_npy(name, 1, descr, false, shape, NULL, 0);
    FILE *f = fopen(p, "r+b");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long hdr = ftell(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)((uint64_t)hdr + data_bytes)), 0);
    fclose(f);
    return p;
}

/* A valid small targets file, three rows. */
static const char *write_y3(void)
{
    static const float y[3] = {1, 2, 3};
    return write_npy("y.npy", 1, "<f4", false, "(3,)", y, sizeof y);
}

static const char *write_x3(void)
{
    static const float x[6] = {1, 2, 3, 4, 5, 6};
    return write_npy("x.npy", 1, "<f4", false, "(3, 2)", x, sizeof x);
}

/* rc must be DDP_ERR_INPUT, d zeroed, err one line naming file and saying phrase. */
static void expect_fail(int rc, const dataset_t *d, const char *err, const char *file,
                        const char *phrase)
{
    cr_assert_eq(rc, DDP_ERR_INPUT, "rc %d, err '%s'", rc, err);
    cr_assert_null(d->x);
    cr_assert_null(d->y);
    cr_assert_eq(d->n, 0);
    cr_assert_eq(d->in_dim, 0);
    cr_assert_eq(d->tgt_cols, 0);
    cr_assert_not(d->labels);
    cr_assert_not_null(strstr(err, file), "'%s' does not name %s", err, file);
    cr_assert_not_null(strstr(err, phrase), "'%s' does not say '%s'", err, phrase);
    cr_assert_null(strchr(err, '\n'), "'%s' is more than one line", err);
    cr_assert_null(strstr(err, "error:"), "'%s' carries a prefix", err);
}

/* A bad features file (with good targets), expecting phrase. */
static void expect_bad_x(const char *phrase)
{
    dataset_t d;
    char err[ERR_LEN] = "";
    const char *y = write_y3();
    int rc = data_load_npy(&d, path_of("x.npy"), y, false, err);
    expect_fail(rc, &d, err, "x.npy", phrase);
}

static void expect_bad_x_dict(const char *dict, const void *data, size_t len, const char *phrase)
{
    write_npy_dict("x.npy", 1, dict, data, len);
    expect_bad_x(phrase);
}

// ----------------------------------------------------------------------------
// npy: good files

Test(npy, f4_features_f4_targets_v1)
{
    const float x[6] = {1.5f, -2.25f, 3.1415927f, 1e-30f, -0.0f, 65504.0f};
    const float y[3] = {0.5f, -7.0f, 1e20f};
    const char *xp = write_npy("x.npy", 1, "<f4", false, "(3, 2)", x, sizeof x);
    const char *yp = write_npy("y.npy", 1, "<f4", false, "(3,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 3);
    cr_assert_eq(d.in_dim, 2);
    cr_assert_eq(d.tgt_cols, 1);
    cr_assert_not(d.labels);
    cr_assert_eq(memcmp(d.x, x, sizeof x), 0, "features differ");
    cr_assert_eq(memcmp(d.y, y, sizeof y), 0, "targets differ");
    cr_assert_not_null(strstr(d.source, "x.npy"));
    cr_assert_not_null(strstr(d.source, "y.npy"));
    data_free(&d);
}

Test(npy, f8_features_f8_targets_2d)
{
    double x[12], y[8];
    for (int i = 0; i < 12; i++)
        x[i] = 0.1 * i - 0.7;
    for (int i = 0; i < 8; i++)
        y[i] = 1.0 / (i + 3);
    const char *xp = write_npy("x.npy", 1, "<f8", false, "(4, 3)", x, sizeof x);
    const char *yp = write_npy("y.npy", 1, "<f8", false, "(4, 2)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 4);
    cr_assert_eq(d.in_dim, 3);
    cr_assert_eq(d.tgt_cols, 2);
    cr_assert_not(d.labels);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(d.x[i], (float)x[i], "x[%d]", i);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(d.y[i], (float)y[i], "y[%d]", i);
    data_free(&d);
}

Test(npy, one_d_features_and_column_targets)
{
    const float x[5] = {1, 2, 3, 4, 5};
    const float y[5] = {5, 4, 3, 2, 1};
    const char *xp = write_npy("x.npy", 1, "<f4", false, "(5,)", x, sizeof x);
    const char *yp = write_npy("y.npy", 1, "<f4", false, "(5, 1)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 5);
    cr_assert_eq(d.in_dim, 1);
    cr_assert_eq(d.tgt_cols, 1);
    cr_assert_eq(memcmp(d.x, x, sizeof x), 0);
    cr_assert_eq(memcmp(d.y, y, sizeof y), 0);
    data_free(&d);
}

Test(npy, i8_targets_are_labels)
{
    const int64_t y[4] = {0, 3, 16777216, 1};
    const char *xp = write_npy("x.npy", 1, "<f4", false, "(4,)", (float[4]){1, 2, 3, 4}, 16);
    const char *yp = write_npy("y.npy", 1, "<i8", false, "(4,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "%s", err);
    cr_assert(d.labels, "integer targets must be labels");
    cr_assert_eq(d.tgt_cols, 1);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(d.y[i], (float)y[i], "y[%d]", i);
    data_free(&d);
}

Test(npy, i4_targets_with_want_labels)
{
    const int32_t y[3] = {2, 0, 7};
    const char *xp = write_x3();
    const char *yp = write_npy("y.npy", 1, "<i4", false, "(3,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, true, err), DDP_OK, "%s", err);
    cr_assert(d.labels);
    cr_assert_eq(d.y[0], 2.0f);
    cr_assert_eq(d.y[1], 0.0f);
    cr_assert_eq(d.y[2], 7.0f);
    data_free(&d);
}

Test(npy, float_targets_as_labels)
{
    const double y[3] = {4.0, -0.0, 9.0};
    const char *xp = write_x3();
    const char *yp = write_npy("y.npy", 1, "<f8", false, "(3,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, true, err), DDP_OK, "%s", err);
    cr_assert(d.labels);
    cr_assert_eq(d.y[0], 4.0f);
    cr_assert_eq(d.y[1], 0.0f);
    cr_assert_not(signbit(d.y[1]), "-0 label stored as -0");
    cr_assert_eq(d.y[2], 9.0f);
    data_free(&d);
}

Test(npy, v2_and_v3_headers)
{
    const float x[6] = {6, 5, 4, 3, 2, 1};
    for (int major = 2; major <= 3; major++) {
        const char *xp = write_npy("x.npy", major, "<f4", false, "(3, 2)", x, sizeof x);
        const char *yp = write_y3();
        dataset_t d;
        char err[ERR_LEN] = "";
        cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "v%d: %s", major, err);
        cr_assert_eq(memcmp(d.x, x, sizeof x), 0);
        data_free(&d);
    }
}

Test(npy, header_spelling_variants)
{
    /* keys reordered, double quotes, no trailing comma, newlines and tabs,
     * Python 2 long suffixes, a trailing comma inside the shape */
    const float x[6] = {1, 2, 3, 4, 5, 6};
    static const char *const dicts[] = {
        "{\"shape\": (3, 2), \"fortran_order\": False, \"descr\": \"<f4\"}",
        "{ 'fortran_order' :False,'shape':(3,2,),'descr':'<f4' , }",
        "{\n\t'descr': '<f4',\n\t'fortran_order': False,\n\t'shape': (3L, 2L)\n}",
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        const char *xp = write_npy_dict("x.npy", 1, dicts[i], x, sizeof x);
        const char *yp = write_y3();
        dataset_t d;
        char err[ERR_LEN] = "";
        cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "dict %zu: %s", i, err);
        cr_assert_eq(d.in_dim, 2);
        cr_assert_eq(memcmp(d.x, x, sizeof x), 0);
        data_free(&d);
    }
}

Test(npy, fortran_order_accepted_where_layout_is_c)
{
    const float x[3] = {1, 2, 3};
    const char *xp = write_npy("x.npy", 1, "<f4", true, "(3, 1)", x, sizeof x);
    const char *yp = write_npy("y.npy", 1, "<f4", true, "(3,)", x, sizeof x);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "%s", err);
    cr_assert_eq(memcmp(d.x, x, sizeof x), 0);
    data_free(&d);
}

Test(npy, many_chunks_round_trip)
{
    /* 3 MB of float64: the data is streamed in 1 MiB chunks */
    const size_t n = 131072, dim = 3;
    double *x = malloc(n * dim * sizeof *x);
    int64_t *y = malloc(n * sizeof *y);
    cr_assert(x && y);
    for (size_t i = 0; i < n * dim; i++)
        x[i] = sin((double)i) * 1000.0;
    for (size_t i = 0; i < n; i++)
        y[i] = (int64_t)(i % 10);
    char shape[64];
    snprintf(shape, sizeof shape, "(%zu, %zu)", n, dim);
    const char *xp = write_npy("x.npy", 1, "<f8", false, shape, x, n * dim * sizeof *x);
    snprintf(shape, sizeof shape, "(%zu,)", n);
    const char *yp = write_npy("y.npy", 1, "<i8", false, shape, y, n * sizeof *y);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, yp, true, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, n);
    for (size_t i = 0; i < n * dim; i++)
        cr_assert_eq(d.x[i], (float)x[i], "x[%zu]", i);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(d.y[i], (float)y[i], "y[%zu]", i);
    data_free(&d);
    free(x);
    free(y);
}

// ----------------------------------------------------------------------------
// npy: hostile files

Test(npy, truncated_data)
{
    const float x[5] = {1, 2, 3, 4, 5};
    write_npy("x.npy", 1, "<f4", false, "(3, 2)", x, sizeof x);
    expect_bad_x("truncated: needs 24 bytes of data, file has 20");
}

Test(npy, trailing_data)
{
    const float x[7] = {1, 2, 3, 4, 5, 6, 7};
    write_npy("x.npy", 1, "<f4", false, "(3, 2)", x, sizeof x);
    expect_bad_x("trailing bytes");
}

Test(npy, truncated_header)
{
    write_file("x.npy", "\x93NUMPY\x01", 7);
    expect_bad_x("truncated header");
    write_file("x.npy", "\x93NUMPY\x01\x00\x40", 9);
    expect_bad_x("truncated header");
    write_file("x.npy", "\x93NUM", 4);
    expect_bad_x("truncated header");
}

Test(npy, header_length_past_end_of_file)
{
    const char b[] = "\x93NUMPY\x01\x00\x60\xea{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (1,), }\n\0\0\0\0";
    write_file("x.npy", b, sizeof b - 1);
    expect_bad_x("header length 60000 runs past the end of the file");
    const char b2[] = "\x93NUMPY\x02\x00\xff\xff\xff\xff{'descr': '<f4'}";
    write_file("x.npy", b2, sizeof b2 - 1);
    expect_bad_x("runs past the end of the file");
}

Test(npy, wrong_magic)
{
    const float x[6] = {0};
    write_npy("x.npy", 1, "<f4", false, "(3, 2)", x, sizeof x);
    FILE *f = fopen(path_of("x.npy"), "r+b");
    cr_assert_not_null(f);
    fputc('X', f); /* first byte */
    fclose(f);
    expect_bad_x("not a .npy file");
    write_text("x.npy", "1,2,3\n4,5,6\n7,8,9\n");
    expect_bad_x("not a .npy file");
}

Test(npy, unsupported_version)
{
    const float x[6] = {0};
    write_npy("x.npy", 4, "<f4", false, "(3, 2)", x, sizeof x);
    expect_bad_x("unsupported .npy format version 4.0");
}

Test(npy, fortran_order_rejected)
{
    const float x[6] = {0};
    write_npy("x.npy", 1, "<f4", true, "(3, 2)", x, sizeof x);
    expect_bad_x("Fortran order is not supported, save with np.ascontiguousarray");
}

Test(npy, unsupported_dtypes)
{
    static const char *const bad[] = {"<c8", "<u2", "|u1", "<f2", "O", "<U10", "|f4", "=f4"};
    const uint8_t zeros[96] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dict[128], phrase[64];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }",
                 bad[i]);
        /* give each the bytes a matching file would have, so only the dtype is wrong */
        write_npy_dict("x.npy", 1, dict, zeros, 12);
        snprintf(phrase, sizeof phrase, "unsupported dtype '%s'", bad[i]);
        expect_bad_x(phrase);
    }
}

Test(npy, big_endian_rejected)
{
    const uint8_t zeros[24] = {0};
    write_npy("x.npy", 1, ">f4", false, "(3, 2)", zeros, sizeof zeros);
    expect_bad_x("unsupported dtype '>f4': big-endian");
    expect_bad_x("astype('<f4')");
}

Test(npy, structured_dtype_rejected)
{
    const uint8_t zeros[24] = {0};
    expect_bad_x_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }",
                      zeros, sizeof zeros, "structured");
}

Test(npy, integer_features_rejected)
{
    const int64_t x[3] = {1, 2, 3};
    write_npy("x.npy", 1, "<i8", false, "(3,)", x, sizeof x);
    expect_bad_x("unsupported dtype '<i8' for features");
}

Test(npy, bogus_shapes)
{
    static const struct {
        const char *shape;
        const char *phrase;
    } cases[] = {
        {"(3, -1)", "non-negative integer"},
        {"(3,, 2)", "non-negative integer"},
        {"(3 2)", "',' or ')'"},
        {"'abc'", "a tuple"},
        {"[3, 2]", "a tuple"},
        {"(3)", "(5,)"},
        {"(3.0, 2)", "',' or ')'"},
        {"(99999999999999999999999,)", "too large"},
        {"(4294967296, 4294967296, 4294967296)", "overflows"},
        {"(4611686018427387904,)", "overflows"}, /* 2^62 * 4 bytes wraps */
        {"(3, 2", "non-negative integer"}, /* runs on into ", }" */
        {"(2, 3, 1)", "has 3 dimensions"},
        {"()", "single value"},
        {"(0, 2)", "no rows"},
        {"(3, 0)", "no columns"},
    };
    const uint8_t zeros[24] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
                 cases[i].shape);
        /* (2,3,1) and () need matching data to get past the size check */
        size_t len = strcmp(cases[i].shape, "()") == 0 ? 4 : 24;
        if (strcmp(cases[i].shape, "(0, 2)") == 0 || strcmp(cases[i].shape, "(3, 0)") == 0)
            len = 0;
        write_npy_dict("x.npy", 1, dict, zeros, len);
        expect_bad_x(cases[i].phrase);
    }
}

Test(npy, bad_header_dicts)
{
    static const struct {
        const char *dict;
        const char *phrase;
    } cases[] = {
        {"{'descr': '<f4', 'shape': (3,), }", "no 'fortran_order'"},
        {"{'fortran_order': False, 'shape': (3,), }", "no 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", "twice"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", "unexpected key"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", "bad header"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (3,)}", "True or False"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (3,)}", "True or False"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "',' or '}'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}", "':'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", "only padding"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,),,}", "quoted key"},
        {"'descr': '<f4', 'fortran_order': False, 'shape': (3,)", "'{'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", "',' or '}'"},
        {"", "'{'"},
        {"{descr: '<f4', 'fortran_order': False, 'shape': (3,)}", "quoted key"},
        {"{'descr': 'a very long dtype string that goes on and on and on and on and on and on', "
         "'fortran_order': False, 'shape': (3,)}",
         "too long"},
    };
    const uint8_t zeros[12] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_bad_x_dict(cases[i].dict, zeros, sizeof zeros, cases[i].phrase);
}

Test(npy, huge_shape_on_tiny_file)
{
    /* 2^40 rows: must fail on the size check, never try to allocate 4 TiB */
    const float x[2] = {1, 2};
    write_npy("x.npy", 1, "<f4", false, "(1099511627776,)", x, sizeof x);
    expect_bad_x("truncated: needs 4398046511104 bytes of data");
    write_npy("x.npy", 1, "<f8", false, "(1099511627776, 1099511627776)", x, sizeof x);
    expect_bad_x("overflows");
}

Test(npy, limits_on_sparse_files)
{
    /* The data is "there" (a sparse file), so only our limits stop these. */
    write_npy_sparse("x.npy", "<f4", "(2147483649,)", (uint64_t)2147483649u * 4);
    expect_bad_x("too many rows");
    write_npy_sparse("x.npy", "<f4", "(1, 16777217)", (uint64_t)16777217u * 4);
    expect_bad_x("too many columns");
    write_npy_sparse("x.npy", "<f4", "(2147483648, 3)", (uint64_t)2147483648u * 12);
    expect_bad_x("too large");
}

Test(npy, float64_out_of_float32_range)
{
    const double x[3] = {1.0, 1e300, 2.0};
    write_npy("x.npy", 1, "<f8", false, "(3,)", x, sizeof x);
    expect_bad_x("row 1, column 0 is 1e+300, outside the float32 range");
    const double x2[6] = {1, 2, 3, 4, 5, -3.4028235677973366e38}; /* rounds to -inf */
    write_npy("x.npy", 1, "<f8", false, "(3, 2)", x2, sizeof x2);
    expect_bad_x("row 2, column 1 is -3.4028235677973366e+38, outside");
}

Test(npy, float64_rounding_to_flt_max_accepted)
{
    /* 3.40282347e+38 (FLT_MAX printed to 9 digits) is above FLT_MAX as a
     * double but rounds to it; NaN and Inf pass through to data_check */
    const double x[3] = {3.40282347e+38, NAN, -INFINITY};
    const char *xp = write_npy("x.npy", 1, "<f8", false, "(3,)", x, sizeof x);
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_npy(&d, xp, write_y3(), false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.x[0], FLT_MAX);
    cr_assert(isnan(d.x[1]));
    cr_assert(isinf(d.x[2]) && d.x[2] < 0);
    data_free(&d);
}

Test(npy, empty_file)
{
    write_file("x.npy", "", 0);
    expect_bad_x("empty file");
}

Test(npy, missing_file)
{
    dataset_t d;
    char err[ERR_LEN] = "";
    const char *yp = write_y3();
    int rc = data_load_npy(&d, path_of("nope.npy"), yp, false, err);
    expect_fail(rc, &d, err, "nope.npy", "cannot open: No such file or directory");
    write_x3();
    rc = data_load_npy(&d, path_of("x.npy"), path_of("gone.npy"), false, err);
    expect_fail(rc, &d, err, "gone.npy", "cannot open");
}

Test(npy, directory_is_not_a_file)
{
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_npy(&d, tmp_dir, write_y3(), false, err);
    expect_fail(rc, &d, err, tmp_dir, "not a regular file");
}

Test(npy, rows_mismatch)
{
    const float y[4] = {1, 2, 3, 4};
    const char *xp = write_x3();
    const char *yp = write_npy("y.npy", 1, "<f4", false, "(4,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_npy(&d, xp, yp, false, err);
    expect_fail(rc, &d, err, "y.npy", "4 rows, but");
    cr_assert_not_null(strstr(err, "x.npy has 3"), "%s", err);
}

Test(npy, non_integer_label)
{
    const float y[3] = {1, 0.5f, 2};
    const char *xp = write_x3();
    const char *yp = write_npy("y.npy", 1, "<f4", false, "(3,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_npy(&d, xp, yp, true, err);
    expect_fail(rc, &d, err, "y.npy", "target row 1 is 0.5, not an integer class id");
    /* without want_labels the same file is fine */
    cr_assert_eq(data_load_npy(&d, xp, yp, false, err), DDP_OK, "%s", err);
    data_free(&d);
}

Test(npy, nan_label)
{
    const double y[3] = {1, 2, NAN};
    const char *xp = write_x3();
    const char *yp = write_npy("y.npy", 1, "<f8", false, "(3,)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_npy(&d, xp, yp, true, err);
    expect_fail(rc, &d, err, "y.npy", "not an integer class id");
}

Test(npy, label_range)
{
    const char *xp = write_x3();
    dataset_t d;
    char err[ERR_LEN] = "";
    const int64_t neg[3] = {1, -1, 2};
    const char *yp = write_npy("y.npy", 1, "<i8", false, "(3,)", neg, sizeof neg);
    expect_fail(data_load_npy(&d, xp, yp, false, err), &d, err, "y.npy",
                "target row 1 is -1, a negative class id");
    const int32_t big[3] = {1, 2, 16777217};
    yp = write_npy("y.npy", 1, "<i4", false, "(3,)", big, sizeof big);
    expect_fail(data_load_npy(&d, xp, yp, false, err), &d, err, "y.npy",
                "16777217, over the largest class id");
    const float negf[3] = {-3, 1, 2};
    yp = write_npy("y.npy", 1, "<f4", false, "(3,)", negf, sizeof negf);
    expect_fail(data_load_npy(&d, xp, yp, true, err), &d, err, "y.npy", "negative class id");
}

Test(npy, labels_need_one_column)
{
    const float y[6] = {0, 1, 0, 1, 0, 1};
    const char *xp = write_x3();
    const char *yp = write_npy("y.npy", 1, "<f4", false, "(3, 2)", y, sizeof y);
    dataset_t d;
    char err[ERR_LEN] = "";
    expect_fail(data_load_npy(&d, xp, yp, true, err), &d, err, "y.npy", "one column");
    const int64_t yi[6] = {0, 1, 0, 1, 0, 1};
    yp = write_npy("y.npy", 1, "<i8", false, "(3, 2)", yi, sizeof yi);
    expect_fail(data_load_npy(&d, xp, yp, false, err), &d, err, "y.npy", "one column");
}

Test(npy, parse_header_from_memory)
{
    /* The exposed parser on its own: a good header and its numbers. */
    uint8_t b[128 + 24];
    memcpy(b, "\x93NUMPY\x01\x00\x76\x00", 10);
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
    memset(b + 10, ' ', 118);
    memcpy(b + 10, dict, strlen(dict));
    b[127] = '\n';
    memset(b + 128, 0, 24);
    npy_info_t info;
    char err[ERR_LEN] = "";
    cr_assert_eq(npy_parse_header(b, sizeof b, sizeof b, &info, err), DDP_OK, "%s", err);
    cr_assert_eq(info.dtype, NPY_F8);
    cr_assert_eq(info.ndim, 1);
    cr_assert_eq(info.shape[0], 3);
    cr_assert_eq(info.data_offset, 128);
    cr_assert_eq(info.data_bytes, 24);
    char s[16];
    npy_shape_str(&info, s, sizeof s);
    cr_assert_str_eq(s, "(3,)");
    /* the same bytes, claiming a larger file than the buffer holds: truncated header */
    cr_assert_eq(npy_parse_header(b, 50, sizeof b, &info, err), DDP_ERR_INPUT);
    cr_assert_not_null(strstr(err, "truncated header"), "%s", err);
}

// ----------------------------------------------------------------------------
// csv: good files

Test(csv, plain_no_header)
{
    const char *p = write_text("data.csv", "1,2,3\n4,5,6\n");
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_csv(&d, p, 1, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.in_dim, 2);
    cr_assert_eq(d.tgt_cols, 1);
    cr_assert_not(d.labels);
    const float x[4] = {1, 2, 4, 5}, y[2] = {3, 6};
    cr_assert_eq(memcmp(d.x, x, sizeof x), 0);
    cr_assert_eq(memcmp(d.y, y, sizeof y), 0);
    cr_assert_not_null(strstr(d.source, "data.csv"));
    data_free(&d);
}

Test(csv, header_crlf_spaces_blank_trailing_lines)
{
    const char *p = write_text("data.csv", "a, b ,target\r\n"
                                           " 0.1 ,\t-2.5E+2, 1e-3\r\n"
                                           "7,8 , 9\r\n"
                                           "\r\n"
                                           "   \n"
                                           "\n");
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_csv(&d, p, 1, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.in_dim, 2);
    cr_assert_eq(d.x[0], (float)0.1);
    cr_assert_eq(d.x[1], -250.0f);
    cr_assert_eq(d.y[0], (float)1e-3);
    cr_assert_eq(d.x[2], 7.0f);
    cr_assert_eq(d.x[3], 8.0f);
    cr_assert_eq(d.y[1], 9.0f);
    data_free(&d);
}

Test(csv, no_trailing_newline_and_bom)
{
    const char *p = write_text("data.csv", "\xEF\xBB\xBFx1,x2,y1,y2\n1,2,3,4\n5,6,7,8");
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_csv(&d, p, 2, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.in_dim, 2);
    cr_assert_eq(d.tgt_cols, 2);
    const float x[4] = {1, 2, 5, 6}, y[4] = {3, 4, 7, 8};
    cr_assert_eq(memcmp(d.x, x, sizeof x), 0);
    cr_assert_eq(memcmp(d.y, y, sizeof y), 0);
    data_free(&d);
}

Test(csv, exact_float_round_trip)
{
    const char *p = write_text("data.csv", "3.1415927,1.17549435e-38,0\n"
                                           "-3.40282347e+38,16777217,1\n");
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_csv(&d, p, 1, true, err), DDP_OK, "%s", err);
    cr_assert(d.labels);
    cr_assert_eq(d.x[0], 3.1415927f);
    cr_assert_eq(d.x[1], 1.17549435e-38f);
    cr_assert_eq(d.x[2], -3.40282347e+38f);
    cr_assert_eq(d.x[3], (float)16777217.0);
    cr_assert_eq(d.y[0], 0.0f);
    cr_assert_eq(d.y[1], 1.0f);
    data_free(&d);
}

// ----------------------------------------------------------------------------
// csv: bad files

static void expect_bad_csv(const char *text, int target_cols, bool want_labels, const char *phrase)
{
    const char *p = write_text("data.csv", text);
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_csv(&d, p, target_cols, want_labels, err);
    expect_fail(rc, &d, err, "data.csv", phrase);
}

Test(csv, wrong_field_count)
{
    expect_bad_csv("1,2,3\n4,5,6\n7,8\n", 1, false, "data.csv: ");
    expect_bad_csv("1,2,3\n4,5,6\n7,8\n", 1, false, "line 3 has 2 fields, expected 3");
    expect_bad_csv("a,b\n1,2\n3,4,5\n", 1, false, "line 3 has 3 fields, expected 2");
    expect_bad_csv("1,2,3\n4,5,6,\n", 1, false, "line 2 has 4 fields, expected 3");
}

Test(csv, non_number)
{
    expect_bad_csv("x,y,z\n1,2,3\n4,abc,6\n", 1, false, "line 3, field 2: 'abc' is not a number");
    expect_bad_csv("1,2,3\n1.2.3,5,6\n", 1, false, "line 2, field 1: '1.2.3' is not a number");
    expect_bad_csv("1,2,3\n4,5 5,6\n", 1, false, "line 2, field 2: '5 5' is not a number");
    expect_bad_csv("1,2,3\n4,\"5\",6\n", 1, false, "is not a number");
}

Test(csv, nan_and_inf)
{
    expect_bad_csv("1,2,3\n4,nan,6\n", 1, false, "line 2, field 2: 'nan' is not a finite number");
    expect_bad_csv("1,NaN,3\n4,5,6\n", 1, false, "line 1, field 2: 'NaN' is not a finite number");
    expect_bad_csv("1,2,3\n4,5,-inf\n", 1, false, "'-inf' is not a finite number");
    expect_bad_csv("1,2,3\n4,5,Infinity\n", 1, false, "'Infinity' is not a finite number");
    expect_bad_csv("1,2,3\n4,1e999,6\n", 1, false, "'1e999' is outside the float32 range");
    expect_bad_csv("1,2,3\n4,1e39,6\n", 1, false, "'1e39' is outside the float32 range");
}

Test(csv, empty_field)
{
    expect_bad_csv("1,2,3\n4,,6\n", 1, false, "line 2, field 2 is empty");
    expect_bad_csv("1,2,3\n4, ,6\n", 1, false, "line 2, field 2 is empty");
}

Test(csv, empty_and_header_only)
{
    expect_bad_csv("", 1, false, "no data rows");
    expect_bad_csv("\n\n  \r\n", 1, false, "no data rows");
    expect_bad_csv("a,b,c\n", 1, false, "no data rows");
    expect_bad_csv("a,b,c", 1, false, "no data rows");
}

Test(csv, target_cols_range)
{
    expect_bad_csv("1,2,3\n4,5,6\n", 3, false,
                   "--target-cols 3 leaves no feature columns in ");
    expect_bad_csv("1,2,3\n4,5,6\n", 3, false, "(3 columns)");
    expect_bad_csv("1,2,3\n4,5,6\n", 7, false, "leaves no feature columns");
    expect_bad_csv("1,2,3\n4,5,6\n", 0, false, "--target-cols 0: must be at least 1");
    expect_bad_csv("1,2,3\n4,5,6\n", 2, true, "exactly one target column");
}

Test(csv, labels)
{
    expect_bad_csv("1,2,0\n4,5,0.5\n", 1, true, "line 2: target 0.5 is not an integer class id");
    expect_bad_csv("1,2,0\n4,5,-1\n", 1, true, "line 2: target -1 is a negative class id");
    expect_bad_csv("1,2,0\n4,5,16777217\n", 1, true, "over the largest class id");
    /* the same fractional target is fine for regression */
    const char *p = write_text("data.csv", "1,2,0\n4,5,0.5\n");
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_csv(&d, p, 1, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.y[1], 0.5f);
    data_free(&d);
}

Test(csv, missing_file)
{
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_csv(&d, path_of("nope.csv"), 1, false, err);
    expect_fail(rc, &d, err, "nope.csv", "cannot open: No such file or directory");
}

Test(csv, nul_byte)
{
    const char *p = write_file("data.csv", "1,2,3\n4,5\0,6\n", 13);
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_csv(&d, p, 1, false, err);
    expect_fail(rc, &d, err, "data.csv", "line 2 contains a NUL byte");
}

// ----------------------------------------------------------------------------
// what a loader must not take silently, nor block on

Test(npy, control_byte_in_a_header_string)
{
    /* '<f4\x00': strcmp would read it as '<f4' */
    const uint8_t zeros[24] = {0};
    static const char dict[] = "{'descr': '<f4\0', 'fortran_order': False, 'shape': (3, 2), }";
    /* write_npy_dict takes a C string: lay the header out by hand with the NUL in it */
    size_t dlen = sizeof dict - 1, hlen = dlen + 1;
    hlen += (64 - (10 + hlen) % 64) % 64;
    uint8_t *b = calloc(1, 10 + hlen + sizeof zeros);
    cr_assert_not_null(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hlen;
    b[9] = (uint8_t)(hlen >> 8);
    memset(b + 10, ' ', hlen);
    memcpy(b + 10, dict, dlen);
    b[10 + hlen - 1] = '\n';
    write_file("x.npy", b, 10 + hlen + sizeof zeros);
    free(b);
    expect_bad_x("bad header: expected a plain quoted string, found byte 0x00");
}

Test(csv, a_first_line_mixing_names_and_numbers_is_a_typo)
{
    /* "O.5" for "0.5": not a header, a broken data line */
    expect_bad_csv("1,O.5,0\n1,2,0\n3,4,1\n", 1, false,
                   "line 1, field 2: 'O.5' is not a number, yet 2 fields of the line are");
    /* a real header: names only */
    const char *p = write_text("data.csv", "x1,x2,label\n1,2,0\n3,4,1\n");
    dataset_t d;
    char err[ERR_LEN] = "";
    cr_assert_eq(data_load_csv(&d, p, 1, false, err), DDP_OK, "%s", err);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.header_lines, 1, "the header is noted for the banner");
    data_free(&d);
}

Test(csv, hex_floats_are_not_numbers)
{
    expect_bad_csv("1,2,3\n4,0x1p3,6\n", 1, false, "line 2, field 2: '0x1p3' is not a number");
    expect_bad_csv("1,2,3\n4,0x10,6\n", 1, false, "'0x10' is not a number");
}

Test(csv, a_fifo_is_refused_without_blocking)
{
    const char *p = path_of("fifo.csv");
    cr_assert_eq(mkfifo(p, 0600), 0);
    dataset_t d;
    char err[ERR_LEN] = "";
    int rc = data_load_csv(&d, p, 1, false, err); /* would block in open(2) */
    expect_fail(rc, &d, err, "fifo.csv", "is a FIFO, not a regular file");
    const char *y = write_y3();
    rc = data_load_npy(&d, p, y, false, err);
    expect_fail(rc, &d, err, "fifo.csv", "is a FIFO, not a regular file");
}
