/* common/io/safetensors.h: the .safetensors format (docs/checkpoints.md): a
 * reader that treats the file as hostile and a writer that replaces files
 * atomically (base/atomic_file.h).  The reader checks what the reference's
 * read_metadata + Metadata::validate do (the tensors tile the data exactly),
 * and more, so that no two readings of one file can differ: no key twice,
 * exactly three fields a tensor, no control character or \u0000 in a string.
 * It stops at the first problem with one line in err (no file name). */
#ifndef DDPBENCH_SAFETENSORS_H
#define DDPBENCH_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/base/atomic_file.h"

#define ST_HEADER_MAX 100000000ULL /* the reference implementation's limit */
#define ST_MAX_DIMS 8
#define ST_PREFIX 8                 /* the header length field */

typedef struct {
    const char *name;            /* points into the parsed header */
    const char *dtype;           /* canonical name: "F32", "F16", ... */
    unsigned bits;               /* per element */
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t count;              /* elements: product of shape (1 for []) */
    uint64_t begin, end;         /* bytes, relative to the data region */
} st_tensor_t;

typedef struct {
    const char *key, *val;
} st_kv_t;

typedef struct {
    uint64_t header_len;         /* N */
    uint64_t data_start;         /* 8 + N: where the data region begins in the file */
    uint64_t data_len;           /* bytes of the data region */
    st_tensor_t *t;              /* sorted by name */
    size_t nt;
    st_kv_t *meta;               /* __metadata__, sorted by key */
    size_t nmeta;
    bool has_metadata;
    void *json;                  /* the cJSON tree the strings point into */
} st_header_t;

/* Parse from a buffer holding the file's first len bytes (the fuzzer's
 * entry; len must cover 8 + N, which a whole file always does). */
int st_parse(const uint8_t *buf, size_t len, uint64_t file_size, st_header_t *h, char *err);
void st_header_free(st_header_t *h);

const st_tensor_t *st_find(const st_header_t *h, const char *name);
const char *st_meta(const st_header_t *h, const char *key); /* NULL when absent */
/* "[10, 4]" (cut short with "...]" when it does not fit). */
void st_shape_str(const int ndim, const uint64_t *shape, char *out, size_t size);

/* What a reader expects: F32 tensors with these shapes and nothing else,
 * except names starting with ignore_prefix (NULL: none).  Reports the first
 * missing tensor, wrong dtype or shape (in the order given), then an extra. */
typedef struct {
    const char *name;
    int ndim;
    uint64_t shape[2];
} st_expect_t;
int st_expect(const st_header_t *h, const st_expect_t *e, size_t n, const char *ignore_prefix,
              char *err);

/* count little-endian F32 values from src (any alignment) into dst. */
void st_decode_f32(const uint8_t *src, size_t count, float *dst);

// ---------------------------------------------------------------------------
// files

typedef struct {
    FILE *f;
    uint64_t size;
    st_header_t h;
} st_file_t;

/* Open (base/infile.h) and parse; DDP_ERR_INPUT for a bad file. */
int st_open(st_file_t *sf, const char *path, char *err);
/* Read an F32 tensor of the open file into dst (t->count floats). */
int st_read_f32(st_file_t *sf, const st_tensor_t *t, float *dst, char *err);
/* The same, and the tensor's hash for the content checksum (below). */
int st_read_f32_hashed(st_file_t *sf, const st_tensor_t *t, float *dst, uint64_t *hash,
                       char *err);
/* Read an F32 tensor through a small buffer, keeping nothing: its hash, and
 * the index of its first NaN or infinite value (t->count when none). */
int st_scan_f32(st_file_t *sf, const st_tensor_t *t, uint64_t *hash, uint64_t *first_nonfinite,
                char *err);
void st_close(st_file_t *sf);

// ---------------------------------------------------------------------------
// the content checksum of checkpoints (docs/checkpoints.md): a hash of every
// other __metadata__ entry, then of each tensor's hash (its name, dtype, shape
// and data, taken as it is read), both in name order; no defence against
// someone who recomputes it.

#define ST_CHECKSUM_KEY "checksum"

/* Check the header's "checksum" against the tensors' hashes (names[i],
 * hashes[i], every tensor of the file).  DDP_ERR_INPUT when it is missing
 * or differs. */
int st_checksum_check(const st_header_t *h, const char *const *names, const uint64_t *hashes,
                      size_t n, char *err);

typedef struct {
    const char *name;
    int ndim;                    /* 1 or 2 */
    uint64_t shape[2];
    const float *data;           /* product(shape) floats, host memory */
} st_out_t;

/* Write t[0..nt) (F32) and the metadata to path atomically (afile_commit:
 * kill_before_rename is DDPBENCH_FAULT=write's).  DDP_ERR_INPUT when the
 * directory cannot take the file, DDP_ERR_RUNTIME when a write fails. */
int st_write(const char *path, const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
             bool kill_before_rename, char *err);
/* The same with the content checksum added to the metadata. */
int st_write_checksummed(const char *path, const st_out_t *t, size_t nt, const st_kv_t *meta,
                         size_t nmeta, bool kill_before_rename, char *err);
/* The same file's bytes into a's temporary (the caller commits a set). */
int st_write_into(afile_t *a, const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
                  char *err);

#endif
