/* app/load/data_npy.c: NumPy .npy files: the header parser (npy.h) and data_load_npy (load.h).
 * Files are hostile: the header is checked in full (npy.h) before anything is allocated for
 * the data, which is then streamed through a small buffer into float32 (a float64 file never
 * needs twice its size in memory), decoded byte by byte (little endian, any host). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* fseeko */
#endif

#include "app/load/npy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "app/load/load.h"
#include "common/base/infile.h"
#include "common/base/status.h"
#include "common/base/text.h"

#define READ_CHUNK ((size_t)1 << 20)

// ----------------------------------------------------------------------------
// small helpers

static uint16_t rd_le16(const uint8_t *p) { return (uint16_t)(p[0] | (unsigned)p[1] << 8); }

static uint32_t rd_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd_le64(const uint8_t *p)
{
    return (uint64_t)rd_le32(p) | (uint64_t)rd_le32(p + 4) << 32;
}

void data_fmt_num(double v, char *out, size_t size)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (!isfinite(v) || strtod(out, NULL) == v)
            return;
    }
}

/* Our dtypes, in npy_dtype_t's order. */
static const struct {
    const char *name;
    npy_dtype_t type;
    size_t size;
} known[] = {
    {"<f4", NPY_F4, 4}, {"<f8", NPY_F8, 8}, {"<i4", NPY_I4, 4}, {"<i8", NPY_I8, 8},
};

static const char *npy_dtype_name(npy_dtype_t t) { return known[t].name; }

void npy_shape_str(const npy_info_t *info, char *out, size_t size)
{
    char tmp[NPY_MAX_DIMS * 24 + 8]; /* room for every dimension at 20 digits */
    size_t o = 0;
    tmp[o++] = '(';
    for (int i = 0; i < info->ndim; i++)
        o += (size_t)snprintf(tmp + o, sizeof tmp - o, i ? ", %llu" : "%llu",
                              (unsigned long long)info->shape[i]);
    snprintf(tmp + o, sizeof tmp - o, info->ndim == 1 ? ",)" : ")");
    if (size == 0)
        return;
    if (strlen(tmp) < size || size < 5)
        snprintf(out, size, "%s", tmp);
    else /* cut short, and say so */
        snprintf(out, size, "%.*s...)", (int)(size - 5), tmp);
}

// ----------------------------------------------------------------------------
// the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//
// A strict reader for exactly the Python literals numpy writes: quoted strings,
// True/False, tuples of non-negative integers (an 'L' suffix from Python 2 is
// tolerated).  Keys in any order, each exactly once, whitespace anywhere
// between tokens, a trailing comma allowed.

typedef struct {
    const char *s; /* header text, not NUL terminated */
    size_t len;
    size_t pos;
    char *err;
} hdr_reader_t;

static int hdr_peek(const hdr_reader_t *r)
{
    return r->pos < r->len ? (unsigned char)r->s[r->pos] : -1;
}

static void hdr_skip_ws(hdr_reader_t *r)
{
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        r->pos++;
    }
}

static int hdr_fail(const hdr_reader_t *r, const char *expected)
{
    char found[32];
    int c = hdr_peek(r);
    if (c < 0)
        snprintf(found, sizeof found, "the end of the header");
    else if (c >= 0x20 && c < 0x7f)
        snprintf(found, sizeof found, "'%c'", c);
    else
        snprintf(found, sizeof found, "byte 0x%02x", (unsigned)c);
    return err_set(r->err, DDP_ERR_INPUT, "bad header: expected %s, found %s at byte %zu of the header",
                   expected, found, r->pos);
}

/* A quoted string (no escapes) into out. */
static int hdr_string(hdr_reader_t *r, char *out, size_t size, const char *what)
{
    int q = hdr_peek(r);
    if (q != '\'' && q != '"')
        return hdr_fail(r, what);
    size_t start = ++r->pos;
    while (r->pos < r->len && r->s[r->pos] != (char)q) {
        unsigned char c = (unsigned char)r->s[r->pos];
        /* no escapes, and no control byte: '<f4\x00' must not read as '<f4' */
        if (c == '\\' || c < 0x20 || c == 0x7f)
            return hdr_fail(r, "a plain quoted string");
        r->pos++;
    }
    if (r->pos >= r->len)
        return hdr_fail(r, "a closing quote");
    size_t n = r->pos - start;
    r->pos++;
    if (n >= size) {
        char shown[40];
        text_escape(r->s + start, n, shown, sizeof shown);
        return err_set(r->err, DDP_ERR_INPUT, "bad header: string '%s' is too long", shown);
    }
    memcpy(out, r->s + start, n);
    out[n] = '\0';
    return DDP_OK;
}

static int hdr_bool(hdr_reader_t *r, bool *out)
{
    static const char *const words[2] = {"False", "True"};
    for (int v = 0; v < 2; v++) {
        size_t n = strlen(words[v]);
        if (r->len - r->pos >= n && memcmp(r->s + r->pos, words[v], n) == 0) {
            size_t end = r->pos + n;
            if (end < r->len && (isalnum((unsigned char)r->s[end]) || r->s[end] == '_'))
                continue;
            r->pos = end;
            *out = v == 1;
            return DDP_OK;
        }
    }
    return hdr_fail(r, "True or False for 'fortran_order'");
}

static int hdr_shape(hdr_reader_t *r, npy_info_t *info)
{
    if (hdr_peek(r) != '(')
        return hdr_fail(r, "a tuple such as (100, 10) for 'shape'");
    r->pos++;
    hdr_skip_ws(r);
    info->ndim = 0;
    if (hdr_peek(r) == ')') { /* () : a scalar */
        r->pos++;
        return DDP_OK;
    }
    for (;;) {
        int c = hdr_peek(r);
        if (c < '0' || c > '9')
            return hdr_fail(r, "a non-negative integer in 'shape'");
        uint64_t v = 0;
        size_t start = r->pos;
        while ((c = hdr_peek(r)) >= '0' && c <= '9') {
            if (v > (UINT64_MAX - (uint64_t)(c - '0')) / 10) {
                char shown[40];
                while (hdr_peek(r) >= '0' && hdr_peek(r) <= '9')
                    r->pos++;
                text_escape(r->s + start, r->pos - start, shown, sizeof shown);
                return err_set(r->err, DDP_ERR_INPUT,
                               "bad header: shape dimension %s is too large", shown);
            }
            v = v * 10 + (uint64_t)(c - '0');
            r->pos++;
        }
        if (hdr_peek(r) == 'L') /* Python 2 long */
            r->pos++;
        if (info->ndim == NPY_MAX_DIMS)
            return err_set(r->err, DDP_ERR_INPUT,
                           "bad header: shape has more than %d dimensions", NPY_MAX_DIMS);
        info->shape[info->ndim++] = v;
        hdr_skip_ws(r);
        if (hdr_peek(r) == ')') {
            if (info->ndim == 1) /* (5) is the number 5 in Python, not a tuple */
                return hdr_fail(r, "',' after the only dimension in 'shape', as in (5,)");
            r->pos++;
            return DDP_OK;
        }
        if (hdr_peek(r) != ',')
            return hdr_fail(r, "',' or ')' in 'shape'");
        r->pos++;
        hdr_skip_ws(r);
        if (hdr_peek(r) == ')') {
            r->pos++;
            return DDP_OK;
        }
    }
}

/* Map a descr string to one of ours, or explain why not. */
static int npy_dtype_parse(const char *descr, npy_info_t *info, char *err)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(descr, known[i].name) == 0) {
            info->dtype = known[i].type;
            info->elem_size = known[i].size;
            return DDP_OK;
        }
    }
    char shown[40];
    text_escape(descr, strlen(descr), shown, sizeof shown);
    if (descr[0] == '>') {
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(descr + 1, known[i].name + 1) == 0)
                return err_set(err, DDP_ERR_INPUT,
                               "unsupported dtype '%s': big-endian data is not supported, "
                               "save with arr.astype('%s')",
                               shown, known[i].name);
        }
    }
    return err_set(err, DDP_ERR_INPUT,
                   "unsupported dtype '%s' (supported: '<f4', '<f8', and '<i4', '<i8' for class "
                   "ids)",
                   shown);
}

static int hdr_dict(hdr_reader_t *r, npy_info_t *info)
{
    enum { K_DESCR = 1, K_FORTRAN = 2, K_SHAPE = 4 };
    unsigned seen = 0;
    char descr[64] = "";

    hdr_skip_ws(r);
    if (hdr_peek(r) != '{')
        return hdr_fail(r, "'{' opening the header dict");
    r->pos++;
    for (;;) {
        hdr_skip_ws(r);
        if (hdr_peek(r) == '}')
            break;
        char key[32];
        size_t key_pos = r->pos;
        int rc = hdr_string(r, key, sizeof key, "a quoted key or '}'");
        if (rc)
            return rc;
        unsigned bit = strcmp(key, "descr") == 0           ? K_DESCR
                       : strcmp(key, "fortran_order") == 0 ? K_FORTRAN
                       : strcmp(key, "shape") == 0         ? K_SHAPE
                                                           : 0;
        char shown[40];
        text_escape(key, strlen(key), shown, sizeof shown);
        if (!bit)
            return err_set(r->err, DDP_ERR_INPUT,
                           "bad header: unexpected key '%s' at byte %zu of the header (expected "
                           "'descr', 'fortran_order', 'shape')",
                           shown, key_pos);
        if (seen & bit)
            return err_set(r->err, DDP_ERR_INPUT, "bad header: key '%s' appears twice", shown);
        seen |= bit;
        hdr_skip_ws(r);
        if (hdr_peek(r) != ':')
            return hdr_fail(r, "':' after a key");
        r->pos++;
        hdr_skip_ws(r);
        if (bit == K_DESCR) {
            if (hdr_peek(r) == '[')
                return err_set(r->err, DDP_ERR_INPUT,
                               "unsupported dtype: structured arrays (a list 'descr') are not "
                               "supported");
            rc = hdr_string(r, descr, sizeof descr, "a quoted dtype string for 'descr'");
        } else if (bit == K_FORTRAN) {
            rc = hdr_bool(r, &info->fortran_order);
        } else {
            rc = hdr_shape(r, info);
        }
        if (rc)
            return rc;
        hdr_skip_ws(r);
        if (hdr_peek(r) == ',') {
            r->pos++;
            continue;
        }
        if (hdr_peek(r) != '}')
            return hdr_fail(r, "',' or '}' after a value");
    }
    r->pos++; /* '}' */
    hdr_skip_ws(r);
    if (r->pos != r->len)
        return hdr_fail(r, "only padding after the header dict");
    if (seen != (K_DESCR | K_FORTRAN | K_SHAPE))
        return err_set(r->err, DDP_ERR_INPUT, "bad header: the dict has no '%s' key",
                       !(seen & K_DESCR) ? "descr" : !(seen & K_FORTRAN) ? "fortran_order" : "shape");
    return npy_dtype_parse(descr, info, r->err);
}

// ----------------------------------------------------------------------------
// npy_parse_header

int npy_parse_header(const uint8_t *buf, size_t len, size_t file_size, npy_info_t *info, char *err)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    memset(info, 0, sizeof *info);
    if (file_size < len)
        file_size = len;
    if (file_size == 0)
        return err_set(err, DDP_ERR_INPUT, "empty file, not a .npy file");
    if (memcmp(buf, magic, len < 6 ? len : 6) != 0)
        return err_set(err, DDP_ERR_INPUT, "not a .npy file (it does not start with \\x93NUMPY)");
    if (len < 8)
        return err_set(err, DDP_ERR_INPUT, "truncated header: the file ends after %zu bytes", len);
    info->major = buf[6];
    info->minor = buf[7];
    if (info->major < 1 || info->major > 3 || info->minor != 0)
        return err_set(err, DDP_ERR_INPUT,
                       "unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)",
                       info->major, info->minor);
    size_t pre = info->major == 1 ? 10 : 12;
    if (len < pre)
        return err_set(err, DDP_ERR_INPUT, "truncated header: the file ends after %zu bytes", len);
    size_t hlen = info->major == 1 ? rd_le16(buf + 8) : rd_le32(buf + 8);
    if (hlen > file_size - pre)
        return err_set(err, DDP_ERR_INPUT,
                       "truncated header: header length %zu runs past the end of the file "
                       "(%zu bytes)",
                       hlen, file_size);
    if (hlen > NPY_HEADER_MAX)
        return err_set(err, DDP_ERR_INPUT, "header of %zu bytes is over the %zu-byte limit", hlen,
                       NPY_HEADER_MAX);
    if (hlen > len - pre)
        return err_set(err, DDP_ERR_INPUT, "truncated header: only %zu of its %zu bytes were read",
                       len - pre, hlen);

    hdr_reader_t r = {(const char *)buf + pre, hlen, 0, err};
    int rc = hdr_dict(&r, info);
    if (rc)
        return rc;

    char shape[96];
    npy_shape_str(info, shape, sizeof shape);

    /* Fortran order only matters when two dimensions are longer than 1. */
    if (info->fortran_order) {
        int long_dims = 0;
        for (int i = 0; i < info->ndim; i++)
            long_dims += info->shape[i] > 1;
        if (long_dims > 1)
            return err_set(err, DDP_ERR_INPUT,
                           "Fortran order is not supported, save with np.ascontiguousarray");
    }

    uint64_t count = 1;
    for (int i = 0; i < info->ndim; i++) {
        if (__builtin_mul_overflow(count, info->shape[i], &count))
            return err_set(err, DDP_ERR_INPUT, "shape %s overflows: too many elements", shape);
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(count, (uint64_t)info->elem_size, &bytes) || bytes > SIZE_MAX)
        return err_set(err, DDP_ERR_INPUT, "shape %s overflows: too many elements", shape);
    info->count = count;
    info->data_bytes = (size_t)bytes;
    info->data_offset = pre + hlen;

    size_t avail = file_size - info->data_offset;
    if (info->data_bytes > avail)
        return err_set(err, DDP_ERR_INPUT,
                       "truncated: needs %zu bytes of data, file has %zu (shape %s of %s)",
                       info->data_bytes, avail, shape, npy_dtype_name(info->dtype));
    if (info->data_bytes < avail)
        return err_set(err, DDP_ERR_INPUT,
                       "%zu bytes of data where shape %s of %s needs %zu: trailing bytes after "
                       "the array",
                       avail, shape, npy_dtype_name(info->dtype), info->data_bytes);
    return DDP_OK;
}

// ----------------------------------------------------------------------------
// one file of the dataset: open, check the header against its role, stream the data

typedef struct {
    FILE *f;
    const char *path;
    npy_info_t info;
    size_t rows, cols;
} npy_file_t;

static bool dtype_is_int(npy_dtype_t t) { return t == NPY_I4 || t == NPY_I8; }

/* Open path, parse its header, check it can be features (targets = false) or
 * targets.  Leaves nf->f open at no particular offset on success. */
static int npy_file_open(npy_file_t *nf, const char *path, bool targets, char *err)
{
    memset(nf, 0, sizeof *nf);
    nf->path = path;
    uint64_t fsize;
    int rc = infile_fopen(path, &nf->f, &fsize, err); /* never blocks on a FIFO */
    if (rc != DDP_OK)
        return err_prefix(err, rc, "%s", path);
    if (fsize > SIZE_MAX)
        return err_set(err, DDP_ERR_INPUT, "%s: file size is out of range", path);
    size_t file_size = (size_t)fsize;

    size_t want = file_size < NPY_PREAMBLE_MAX + NPY_HEADER_MAX ? file_size
                                                                : NPY_PREAMBLE_MAX + NPY_HEADER_MAX;
    uint8_t *buf = malloc(want ? want : 1);
    if (!buf)
        return err_set(err, DDP_ERR_INPUT, "%s: out of memory reading the header", path);
    size_t got = fread(buf, 1, want, nf->f);
    if (got != want) {
        int ioerr = ferror(nf->f);
        free(buf);
        return ioerr ? err_set(err, DDP_ERR_INPUT, "%s: read error: %s", path, strerror(errno))
                     : err_set(err, DDP_ERR_INPUT, "%s: truncated: the file shrank while reading",
                               path);
    }
    rc = npy_parse_header(buf, want, file_size, &nf->info, err);
    free(buf);
    if (rc)
        return err_prefix(err, rc, "%s", path);

    const npy_info_t *in = &nf->info;
    char shape[96];
    npy_shape_str(in, shape, sizeof shape);
    const char *expect = targets ? "[n] or [n, k]" : "[n] or [n, d]";
    if (in->ndim == 0)
        return err_set(err, DDP_ERR_INPUT, "%s: shape () is a single value, expected %s", path,
                       expect);
    if (in->ndim > 2)
        return err_set(err, DDP_ERR_INPUT, "%s: shape %s has %d dimensions, expected %s", path,
                       shape, in->ndim, expect);
    uint64_t rows = in->shape[0], cols = in->ndim == 2 ? in->shape[1] : 1;
    if (rows == 0)
        return err_set(err, DDP_ERR_INPUT, "%s: shape %s has no rows", path, shape);
    if (cols == 0)
        return err_set(err, DDP_ERR_INPUT, "%s: shape %s has no columns", path, shape);
    if (!targets && dtype_is_int(in->dtype))
        return err_set(err, DDP_ERR_INPUT,
                       "%s: unsupported dtype '%s' for features, save them as float32 ('<f4') "
                       "or float64 ('<f8')",
                       path, npy_dtype_name(in->dtype));
    if (targets && dtype_is_int(in->dtype) && cols != 1)
        return err_set(err, DDP_ERR_INPUT,
                       "%s: integer targets are class ids and must be one column, shape is %s",
                       path, shape);
    if (rows > DATA_MAX_ROWS)
        return err_set(err, DDP_ERR_INPUT, "%s: shape %s has too many rows (limit %zu)", path,
                       shape, DATA_MAX_ROWS);
    if (cols > DATA_MAX_COLS)
        return err_set(err, DDP_ERR_INPUT, "%s: shape %s has too many columns (limit %zu)", path,
                       shape, DATA_MAX_COLS);
    if (rows * cols > DATA_MAX_BYTES / sizeof(float))
        return err_set(err, DDP_ERR_INPUT,
                       "%s: shape %s is too large: %llu bytes as float32, over the limit of %zu",
                       path, shape, (unsigned long long)(rows * cols * sizeof(float)),
                       DATA_MAX_BYTES);
    nf->rows = (size_t)rows;
    nf->cols = (size_t)cols;
    return DDP_OK;
}

/* A target value that must be a class id: integer, 0 <= v <= 2^24. */
static int check_label(const npy_file_t *nf, uint64_t row, double v, char *err)
{
    bool integer = isfinite(v) && v == floor(v);
    if (integer && v >= 0 && v <= DATA_LABEL_MAX)
        return DDP_OK;
    char num[40];
    data_fmt_num(v, num, sizeof num);
    if (!integer)
        return err_set(err, DDP_ERR_INPUT, "%s: target row %llu is %s, not an integer class id",
                       nf->path, (unsigned long long)row, num);
    if (v < 0)
        return err_set(err, DDP_ERR_INPUT, "%s: target row %llu is %s, a negative class id",
                       nf->path, (unsigned long long)row, num);
    return err_set(err, DDP_ERR_INPUT, "%s: target row %llu is %s, over the largest class id %.0f",
                   nf->path, (unsigned long long)row, num, DATA_LABEL_MAX);
}

/* Convert n elements starting at element index first into dst. */
static int npy_decode(const npy_file_t *nf, const uint8_t *src, size_t n, uint64_t first,
                      float *dst, bool labels, char *err)
{
    switch (nf->info.dtype) {
    case NPY_F4:
    case NPY_F8:
        for (size_t i = 0; i < n; i++) {
            double v; /* a float4 as a double: exact, and (float)v is it again */
            if (nf->info.dtype == NPY_F4) {
                uint32_t u = rd_le32(src + 4 * i);
                float f;
                memcpy(&f, &u, sizeof f);
                v = f;
            } else {
                uint64_t u = rd_le64(src + 8 * i);
                memcpy(&v, &u, sizeof v);
            }
            if (labels) {
                int rc = check_label(nf, first + i, v, err);
                if (rc)
                    return rc;
                v = fabs(v); /* v >= 0 here; this turns -0 into +0 */
            } else if (isfinite(v) && fabs(v) >= DATA_FLOAT32_LIMIT) { /* never a float4's */
                /* NaN and Inf pass through for data_check; a finite value float32
                 * cannot hold is a conversion problem, ours to report. */
                char num[40];
                data_fmt_num(v, num, sizeof num);
                uint64_t k = first + i;
                return err_set(err, DDP_ERR_INPUT,
                               "%s: row %llu, column %llu is %s, outside the float32 range",
                               nf->path, (unsigned long long)(k / nf->cols),
                               (unsigned long long)(k % nf->cols), num);
            }
            dst[i] = (float)v;
        }
        return DDP_OK;
    case NPY_I4:
    case NPY_I8:
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            if (nf->info.dtype == NPY_I4) {
                uint32_t u = rd_le32(src + 4 * i);
                int32_t s;
                memcpy(&s, &u, sizeof s);
                v = s;
            } else {
                uint64_t u = rd_le64(src + 8 * i);
                memcpy(&v, &u, sizeof v);
            }
            if (v < 0 || v > (int64_t)DATA_LABEL_MAX) {
                uint64_t row = first + i;
                return v < 0 ? err_set(err, DDP_ERR_INPUT,
                                       "%s: target row %llu is %lld, a negative class id",
                                       nf->path, (unsigned long long)row, (long long)v)
                             : err_set(err, DDP_ERR_INPUT,
                                       "%s: target row %llu is %lld, over the largest class id "
                                       "%.0f",
                                       nf->path, (unsigned long long)row, (long long)v,
                                       DATA_LABEL_MAX);
            }
            dst[i] = (float)v;
        }
        return DDP_OK;
    }
    return err_set(err, DDP_ERR_INPUT, "%s: unsupported dtype", nf->path);
}

static int npy_file_read(npy_file_t *nf, float *out, bool labels, char *err)
{
    const npy_info_t *in = &nf->info;
    if (fseeko(nf->f, (off_t)in->data_offset, SEEK_SET) != 0)
        return err_set(err, DDP_ERR_INPUT, "%s: cannot seek to the data: %s", nf->path,
                       strerror(errno));
    uint8_t *chunk = malloc(READ_CHUNK);
    if (!chunk)
        return err_set(err, DDP_ERR_INPUT, "%s: out of memory", nf->path);
    const size_t per_chunk = READ_CHUNK / in->elem_size;
    int rc = DDP_OK;
    for (uint64_t done = 0; done < in->count && rc == DDP_OK;) {
        size_t n = in->count - done < per_chunk ? (size_t)(in->count - done) : per_chunk;
        size_t got = fread(chunk, in->elem_size, n, nf->f);
        if (got != n) {
            rc = ferror(nf->f)
                     ? err_set(err, DDP_ERR_INPUT, "%s: read error: %s", nf->path, strerror(errno))
                     : err_set(err, DDP_ERR_INPUT,
                               "%s: truncated: the data ended after %llu of %zu bytes (did the "
                               "file change while reading?)",
                               nf->path, (unsigned long long)((done + got) * in->elem_size),
                               in->data_bytes);
            break;
        }
        rc = npy_decode(nf, chunk, n, done, out + done, labels, err);
        done += n;
    }
    free(chunk);
    return rc;
}

// ----------------------------------------------------------------------------
// data_load_npy

/* The two opened files' values into d; the caller closes them, and frees
 * d on failure. */
static int npy_load_pair(dataset_t *d, npy_file_t *xf, npy_file_t *yf, const char *x_path,
                         const char *y_path, bool want_labels, char *err)
{
    if (xf->rows != yf->rows)
        return err_set(err, DDP_ERR_INPUT,
                       "%s: %zu rows, but %s has %zu: features and targets must have the same "
                       "rows",
                       y_path, yf->rows, x_path, xf->rows);
    bool labels = want_labels || dtype_is_int(yf->info.dtype);
    if (labels && yf->cols != 1)
        return err_set(err, DDP_ERR_INPUT,
                       "%s: class labels must be one column of integer ids, this has %zu columns",
                       y_path, yf->cols);
    size_t x_elems = xf->rows * xf->cols, y_elems = yf->rows * yf->cols;
    if (x_elems + y_elems > DATA_MAX_BYTES / sizeof(float))
        return err_set(err, DDP_ERR_INPUT,
                       "%s: features and targets together need %zu bytes as float32, over the "
                       "limit of %zu",
                       x_path, (x_elems + y_elems) * sizeof(float), DATA_MAX_BYTES);
    d->x = malloc(x_elems * sizeof(float));
    d->y = malloc(y_elems * sizeof(float));
    if (!d->x || !d->y)
        return err_set(err, DDP_ERR_INPUT, "%s: out of memory for %zu bytes of data", x_path,
                       (x_elems + y_elems) * sizeof(float));
    TRY(npy_file_read(xf, d->x, false, err));
    TRY(npy_file_read(yf, d->y, labels, err));
    d->n = xf->rows;
    d->in_dim = (int)xf->cols;
    d->tgt_cols = (int)yf->cols;
    d->labels = labels;
    snprintf(d->source, sizeof d->source, "%s + %s", x_path, y_path);
    return DDP_OK;
}

int data_load_npy(dataset_t *d, const char *x_path, const char *y_path, bool want_labels,
                  char *err)
{
    memset(d, 0, sizeof *d);
    if (!x_path || !*x_path || !y_path || !*y_path)
        return err_set(err, DDP_ERR_INPUT,
                       "a .npy dataset needs both a features file and a targets file");
    npy_file_t xf = {0}, yf = {0};
    int rc = npy_file_open(&xf, x_path, false, err);
    if (rc == DDP_OK)
        rc = npy_file_open(&yf, y_path, true, err);
    if (rc == DDP_OK)
        rc = npy_load_pair(d, &xf, &yf, x_path, y_path, want_labels, err);
    if (xf.f)
        fclose(xf.f);
    if (yf.f)
        fclose(yf.f);
    if (rc != DDP_OK)
        data_free(d);
    return rc;
}
