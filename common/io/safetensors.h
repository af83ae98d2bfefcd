/* common/io/safetensors.h: the .safetensors format: a reader that treats the
 * file as hostile, and a writer that replaces files atomically.
 *
 * A file is 8 bytes N (little-endian u64), N bytes of JSON header, then the
 * data region:
 *   {"__metadata__": {"key": "value", ...},
 *    "0.weight": {"dtype": "F32", "shape": [10, 4], "data_offsets": [0, 160]}, ...}
 * data_offsets are [begin, end) bytes from the start of the data region.
 *
 * The reader checks what the reference implementation (huggingface/safetensors,
 * read_metadata + Metadata::validate) checks, in this order, and stops at the
 * first problem with one line in err (no file name: the caller prefixes it):
 *   - the file holds the 8-byte length; N <= ST_HEADER_MAX (100,000,000 bytes,
 *     the reference's MAX_HEADER_SIZE); 8 + N <= the file size, all before
 *     anything is allocated for the header;
 *   - the header is UTF-8, a JSON object (cJSON), followed only by whitespace;
 *   - "__metadata__", when present, maps strings to strings;
 *   - every other key is a tensor with a known dtype, a shape of non-negative
 *     integers and two data_offsets begin <= end; (end - begin) equals
 *     product(shape) * dtype size (overflow checked);
 *   - sorted by offset, the tensors tile the data region exactly: the first
 *     begins at 0, each begins where the previous ends (no overlap, no gap),
 *     and the last ends at the end of the file (no trailing bytes).
 * Stricter than the reference, so that no two readings of one file can differ:
 * a key may appear once, a tensor entry holds exactly those three fields,
 * strings hold no raw control characters and no \u0000, rank <= ST_MAX_DIMS.
 *
 * The writer builds the header with cJSON (the __metadata__ first, then the
 * tensors in the order given, data in that order), pads it with spaces to a
 * multiple of 8 like the reference writer, and writes the file atomically: a
 * temporary ".NAME.tmp.PID.XXXXXX" in the same directory, fflush + fsync,
 * rename over NAME, fsync of the directory.  A process killed before the
 * rename leaves the old file untouched and its temporary behind; the next
 * successful write of NAME removes temporaries of that pattern whose process
 * is gone. */
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
    uint64_t header_len;         /* N */
    uint64_t data_start;         /* 8 + N: where the data region begins in the file */
    uint64_t data_len;           /* bytes of the data region */
    st_tensor_t *t;              /* sorted by name */
    size_t nt;
    const char **meta_key;       /* __metadata__, in file order */
    const char **meta_val;
    size_t nmeta;
    bool has_metadata;
    void *json;                  /* the cJSON tree the strings point into */
} st_header_t;

/* The header length from the first len bytes of a file of file_size bytes:
 * checks the three bounds above.  len >= min(file_size, 8). */
int st_parse_len(const uint8_t *buf, size_t len, uint64_t file_size, uint64_t *header_len,
                 char *err);
/* The header text (header_len bytes, not NUL terminated) of a file of
 * file_size bytes: every other check above.  *h is empty on failure. */
int st_parse_header(const char *text, size_t header_len, uint64_t file_size, st_header_t *h,
                    char *err);
/* Both, from a buffer holding the file's first len bytes (the fuzzer's entry;
 * len must cover 8 + N, which a whole file always does). */
int st_parse(const uint8_t *buf, size_t len, uint64_t file_size, st_header_t *h, char *err);
void st_header_free(st_header_t *h);

const st_tensor_t *st_find(const st_header_t *h, const char *name);
const char *st_meta(const st_header_t *h, const char *key); /* NULL when absent */
/* "[10, 4]" (cut short with "...]" when it does not fit). */
void st_shape_str(const int ndim, const uint64_t *shape, char *out, size_t size);

/* What a reader expects: F32 tensors with these shapes and nothing else,
 * except names starting with ignore_prefix (NULL: none).  Reports the first
 * missing tensor, wrong dtype or wrong shape (in the order given), then the
 * first extra tensor, e.g. "0.weight has shape [10, 5], the model needs [10, 4]". */
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

/* Open and parse; DDP_ERR_INPUT for a missing, unreadable, non-regular (a
 * FIFO, a device: base/infile.h) or malformed file. */
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
// the content checksum (checkpoints)
//
// __metadata__ "checksum" holds 16 hex digits of a 64-bit hash (base/hash.h)
// of every other __metadata__ entry (sorted by key: key, NUL, value, NUL) and
// then of each tensor's own hash, tensors in name order.  A tensor's hash
// covers its name, dtype, shape and data bytes, and is computed while the
// tensor is read, so checking it costs no extra pass over the file.  It
// catches an edited position ("optim_step") or a corrupted byte; it is no
// defence against someone who recomputes it.

#define ST_CHECKSUM_KEY "checksum"

/* The hash of a tensor of this name, dtype and shape holding data. */
uint64_t st_tensor_hash(const char *name, const char *dtype, int ndim, const uint64_t *shape,
                        const void *data, size_t bytes);
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

typedef struct {
    const char *key, *val;
} st_kv_t;

/* Write t[0..nt) (F32) and the metadata to path atomically (see above).
 * kill_before_rename: raise SIGKILL once the temporary is complete and
 * synced, before the rename (fault injection: DDPBENCH_FAULT=write).
 * DDP_ERR_INPUT when the directory cannot take the file, DDP_ERR_RUNTIME when
 * a write fails (disk full, I/O error); no temporary is left behind either way. */
int st_write(const char *path, const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
             bool kill_before_rename, char *err);
/* The same with the content checksum added to the metadata. */
int st_write_checksummed(const char *path, const st_out_t *t, size_t nt, const st_kv_t *meta,
                         size_t nmeta, bool kill_before_rename, char *err);
/* The same file's bytes into a's temporary (the caller commits: a set of
 * files written as one, base/atomic_file.h). */
int st_write_into(afile_t *a, const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
                  char *err);
/* Can st_write create path?  Creates and removes a temporary in its directory
 * (so a long run does not fail at its end for a typo in a directory name). */
int st_check_writable(const char *path, char *err);

#endif
