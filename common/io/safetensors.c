/* common/io/safetensors.c: the .safetensors reader and writer (see
 * safetensors.h for the checks and the file layout). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* fileno, fseeko */
#endif

#include "common/io/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/base/atomic_file.h"
#include "common/base/hash.h"
#include "common/base/infile.h"
#include "common/base/status.h"
#include "common/base/text.h"

#define ST_INT_MAX 9007199254740992.0 /* 2^53: every integer below is exact in a double */
#define NAME_SHOW 48                 /* characters of a hostile name shown in a message */

/* The format is little-endian, and so is every host ddpbench builds for
 * (x86-64, aarch64): its floats are read and written as they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "a little-endian host");

// ---------------------------------------------------------------------------
// dtypes: every one the reference knows, with its size in bits

static const struct {
    const char *name;
    unsigned bits;
} dtypes[] = {
    {"BOOL", 8},     {"U8", 8},    {"I8", 8},     {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8},  {"I16", 16},  {"U16", 16},   {"F16", 16},    {"BF16", 16},
    {"I32", 32},     {"U32", 32},  {"F32", 32},   {"F64", 64},    {"I64", 64},
    {"U64", 64},     {"C64", 64},  {"F4", 4},     {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

// ---------------------------------------------------------------------------
// small helpers

/* Untrusted text as a short printable string for a message. */
static const char *show(const char *s, char *out, size_t size)
{
    return text_escape(s, strlen(s), out, size);
}

void st_shape_str(const int ndim, const uint64_t *shape, char *out, size_t size)
{
    if (size == 0)
        return;
    char tmp[ST_MAX_DIMS * 24 + 4];
    size_t o = 0;
    tmp[o++] = '[';
    for (int i = 0; i < ndim && i < ST_MAX_DIMS; i++)
        o += (size_t)snprintf(tmp + o, sizeof tmp - o, i ? ", %llu" : "%llu",
                              (unsigned long long)shape[i]);
    snprintf(tmp + o, sizeof tmp - o, "]");
    if (strlen(tmp) < size || size < 5)
        snprintf(out, size, "%s", tmp);
    else
        snprintf(out, size, "%.*s...]", (int)(size - 5), tmp);
}

static uint64_t rd_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void st_decode_f32(const uint8_t *src, size_t count, float *dst)
{
    memcpy(dst, src, count * 4);
}

// ---------------------------------------------------------------------------
// the length prefix

/* The header length from the first len bytes (len >= min(file_size, 8)). */
static int st_parse_len(const uint8_t *buf, size_t len, uint64_t file_size, uint64_t *header_len,
                        char *err)
{
    if (file_size == 0)
        return err_set(err, DDP_ERR_INPUT, "the file is empty (not a .safetensors file)");
    if (file_size < ST_PREFIX || len < ST_PREFIX)
        return err_set(err, DDP_ERR_INPUT,
                       "the file is %llu bytes, too short for the 8-byte header length",
                       (unsigned long long)file_size);
    uint64_t n = rd_le64(buf);
    if (n > ST_HEADER_MAX)
        return err_set(err, DDP_ERR_INPUT,
                       "header length %llu is absurd (the format's limit is %llu bytes)",
                       (unsigned long long)n, (unsigned long long)ST_HEADER_MAX);
    if (n > file_size - ST_PREFIX)
        return err_set(err, DDP_ERR_INPUT,
                       "header length %llu runs past the end of the file (%llu bytes): "
                       "truncated or not a .safetensors file",
                       (unsigned long long)n, (unsigned long long)file_size);
    *header_len = n;
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the header text: UTF-8 and the lexical rules cJSON does not enforce

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int check_text(const char *text, size_t n, char *err)
{
    const unsigned char *s = (const unsigned char *)text;
    bool in_str = false;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c >= 0x80) {
            size_t k = text_utf8_len(s + i, n - i);
            if (!k)
                return err_set(err, DDP_ERR_INPUT, "the header is not valid UTF-8 (byte %zu)",
                               ST_PREFIX + i);
            i += k;
            continue;
        }
        if (in_str) {
            if (c < 0x20)
                return err_set(err, DDP_ERR_INPUT,
                               "the header is not valid JSON (control character 0x%02x in a "
                               "string, byte %zu)",
                               c, ST_PREFIX + i);
            if (c == '\\' && i + 1 < n && s[i + 1] < 0x80) {
                if (s[i + 1] == 'u' && i + 5 < n) {
                    int v = 0;
                    for (int j = 2; j < 6 && v >= 0; j++) {
                        int h = hexval(s[i + j]);
                        v = h < 0 ? -1 : v * 16 + h;
                    }
                    if (v == 0)
                        return err_set(err, DDP_ERR_INPUT,
                                       "the header holds a \\u0000 escape (byte %zu), which "
                                       "ddpbench does not accept in names",
                                       ST_PREFIX + i);
                }
                i += 2;
                continue;
            }
            if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            return err_set(err, DDP_ERR_INPUT,
                           "the header is not valid JSON (control character 0x%02x, byte %zu)",
                           c, ST_PREFIX + i);
        }
        i++;
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the header's JSON

/* A JSON number that is an integer in [0, 2^53]. */
static bool get_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= ST_INT_MAX) || d != (double)(uint64_t)d)
        return false;
    *out = (uint64_t)d;
    return true;
}

static int cmp_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const st_kv_t *)a)->key, ((const st_kv_t *)b)->key);
}

static int parse_metadata(const cJSON *m, st_header_t *h, char *err)
{
    char a[NAME_SHOW + 4];
    if (!cJSON_IsObject(m))
        return err_set(err, DDP_ERR_INPUT,
                       "__metadata__ is not a JSON object (it must map strings to strings)");
    size_t n = (size_t)cJSON_GetArraySize(m);
    if (!(h->meta = calloc(n ? n : 1, sizeof *h->meta)))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the header");
    for (const cJSON *c = m->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return err_set(err, DDP_ERR_INPUT,
                           "__metadata__ value of '%s' is not a string (safetensors metadata "
                           "holds strings only)",
                           show(c->string, a, sizeof a));
        h->meta[h->nmeta++] = (st_kv_t){c->string, c->valuestring};
    }
    /* Duplicates once sorted: a hostile header may hold millions of keys. */
    qsort(h->meta, n, sizeof *h->meta, cmp_kv);
    for (size_t i = 1; i < n; i++)
        if (strcmp(h->meta[i - 1].key, h->meta[i].key) == 0)
            return err_set(err, DDP_ERR_INPUT, "__metadata__ names '%s' twice",
                           show(h->meta[i].key, a, sizeof a));
    return DDP_OK;
}

static int parse_tensor(const cJSON *c, uint64_t data_len, st_tensor_t *t, char *err)
{
    char a[NAME_SHOW + 4], s[96];
    const char *nm = show(c->string, a, sizeof a);
    t->name = c->string;
    if (!cJSON_IsObject(c))
        return err_set(err, DDP_ERR_INPUT, "tensor '%s' is not a JSON object", nm);
    const cJSON *dt = NULL, *sh = NULL, *off = NULL;
    for (const cJSON *f = c->child; f; f = f->next) {
        const cJSON **slot = strcmp(f->string, "dtype") == 0          ? &dt
                             : strcmp(f->string, "shape") == 0        ? &sh
                             : strcmp(f->string, "data_offsets") == 0 ? &off
                                                                      : NULL;
        char b[NAME_SHOW + 4];
        if (!slot)
            return err_set(err, DDP_ERR_INPUT, "tensor '%s' has an unknown field '%s'", nm,
                           show(f->string, b, sizeof b));
        if (*slot)
            return err_set(err, DDP_ERR_INPUT, "tensor '%s' names '%s' twice", nm, f->string);
        *slot = f;
    }
    if (!dt || !sh || !off)
        return err_set(err, DDP_ERR_INPUT, "tensor '%s' has no %s", nm,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");

    if (!cJSON_IsString(dt))
        return err_set(err, DDP_ERR_INPUT, "tensor '%s': dtype is not a string", nm);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0] && !t->dtype; i++)
        if (strcmp(dt->valuestring, dtypes[i].name) == 0) {
            t->dtype = dtypes[i].name;
            t->bits = dtypes[i].bits;
        }
    if (!t->dtype)
        return err_set(err, DDP_ERR_INPUT, "tensor '%s' has unknown dtype '%s'", nm,
                       show(dt->valuestring, s, sizeof s));

    if (!cJSON_IsArray(sh))
        return err_set(err, DDP_ERR_INPUT, "tensor '%s': shape is not a list", nm);
    t->count = 1;
    bool overflow = false;
    for (const cJSON *d = sh->child; d; d = d->next) {
        if (t->ndim == ST_MAX_DIMS)
            return err_set(err, DDP_ERR_INPUT,
                           "tensor '%s' has more than %d dimensions (ddpbench's limit)", nm,
                           ST_MAX_DIMS);
        if (!get_uint(d, &t->shape[t->ndim]))
            return err_set(err, DDP_ERR_INPUT,
                           "tensor '%s': shape holds something other than a non-negative "
                           "integer",
                           nm);
        overflow |= __builtin_mul_overflow(t->count, t->shape[t->ndim], &t->count);
        t->ndim++;
    }
    uint64_t bits;
    st_shape_str(t->ndim, t->shape, s, sizeof s);
    if (overflow || __builtin_mul_overflow(t->count, (uint64_t)t->bits, &bits))
        return err_set(err, DDP_ERR_INPUT, "tensor '%s': shape %s overflows", nm, s);
    if (bits % 8)
        return err_set(err, DDP_ERR_INPUT,
                       "tensor '%s': shape %s of %s does not fill whole bytes", nm, s, t->dtype);

    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !get_uint(off->child, &t->begin) ||
        !get_uint(off->child->next, &t->end))
        return err_set(err, DDP_ERR_INPUT,
                       "tensor '%s': data_offsets is not a list of two non-negative integers",
                       nm);
    if (t->begin > t->end)
        return err_set(err, DDP_ERR_INPUT,
                       "tensor '%s': data_offsets [%llu, %llu] end before they begin", nm,
                       (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end - t->begin != bits / 8)
        return err_set(err, DDP_ERR_INPUT,
                       "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, shape %s of %s "
                       "needs %llu",
                       nm, (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)(t->end - t->begin), s, t->dtype,
                       (unsigned long long)(bits / 8));
    if (t->end > data_len)
        return err_set(err, DDP_ERR_INPUT,
                       "tensor '%s': data_offsets [%llu, %llu] run past the end of the data "
                       "(%llu bytes): truncated file?",
                       nm, (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)data_len);
    return DDP_OK;
}

static int cmp_offsets(const void *a, const void *b)
{
    const st_tensor_t *x = *(const st_tensor_t *const *)a, *y = *(const st_tensor_t *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(((const st_tensor_t *)a)->name, ((const st_tensor_t *)b)->name);
}

/* The reference's validate(): sorted by offset, the tensors tile [0, data_len). */
static int check_tiling(st_header_t *h, char *err)
{
    char a[NAME_SHOW + 4], b[NAME_SHOW + 4];
    const st_tensor_t **by_off = malloc((h->nt ? h->nt : 1) * sizeof *by_off);
    if (!by_off)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the header");
    for (size_t i = 0; i < h->nt; i++)
        by_off[i] = &h->t[i];
    qsort(by_off, h->nt, sizeof *by_off, cmp_offsets);
    int rc = DDP_OK;
    uint64_t at = 0;
    for (size_t i = 0; i < h->nt && rc == DDP_OK; i++) {
        const st_tensor_t *t = by_off[i];
        if (t->begin > at)
            rc = err_set(err, DDP_ERR_INPUT,
                         "bytes %llu..%llu of the data belong to no tensor (a gap %s '%s')",
                         (unsigned long long)at, (unsigned long long)t->begin,
                         i ? "before" : "before the first tensor,", show(t->name, a, sizeof a));
        else if (t->begin < at)
            rc = err_set(err, DDP_ERR_INPUT,
                         "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                         show(by_off[i - 1]->name, a, sizeof a),
                         (unsigned long long)by_off[i - 1]->begin,
                         (unsigned long long)by_off[i - 1]->end, show(t->name, b, sizeof b),
                         (unsigned long long)t->begin, (unsigned long long)t->end);
        at = t->end;
    }
    if (rc == DDP_OK && at != h->data_len)
        rc = err_set(err, DDP_ERR_INPUT,
                     "the file has %llu bytes after the last tensor's data (the offsets must "
                     "cover the data exactly)",
                     (unsigned long long)(h->data_len - at));
    free(by_off);
    return rc;
}

/* The parsed JSON root's entries into h: the metadata once, every tensor,
 * no name twice, tiling the data.  The caller frees h on failure. */
static int header_entries(const cJSON *root, st_header_t *h, char *err)
{
    if (!cJSON_IsObject(root))
        return err_set(err, DDP_ERR_INPUT, "the header is not a JSON object");
    size_t n = (size_t)cJSON_GetArraySize(root);
    if (!(h->t = calloc(n ? n : 1, sizeof *h->t)))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the header (%zu entries)", n);
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (h->has_metadata)
                return err_set(err, DDP_ERR_INPUT, "the header names __metadata__ twice");
            h->has_metadata = true;
            TRY(parse_metadata(c, h, err));
            continue;
        }
        TRY(parse_tensor(c, h->data_len, &h->t[h->nt], err));
        h->nt++;
    }
    qsort(h->t, h->nt, sizeof *h->t, cmp_names);
    for (size_t i = 1; i < h->nt; i++)
        if (strcmp(h->t[i - 1].name, h->t[i].name) == 0) {
            char a[NAME_SHOW + 4];
            return err_set(err, DDP_ERR_INPUT, "the header names tensor '%s' twice",
                           show(h->t[i].name, a, sizeof a));
        }
    return check_tiling(h, err);
}

/* The header text (header_len bytes, not NUL terminated); *h is empty on failure. */
static int st_parse_header(const char *text, size_t header_len, uint64_t file_size,
                           st_header_t *h, char *err)
{
    memset(h, 0, sizeof *h);
    if (file_size < ST_PREFIX || header_len > ST_HEADER_MAX || header_len > file_size - ST_PREFIX)
        return err_set(err, DDP_ERR_INPUT, "header length %zu does not fit the file", header_len);
    h->header_len = header_len;
    h->data_start = ST_PREFIX + header_len;
    h->data_len = file_size - h->data_start;
    TRY(check_text(text, header_len, err));

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, header_len, &end, 0);
    if (!root) {
        size_t at = end && end >= text && end <= text + header_len ? (size_t)(end - text) : 0;
        return err_set(err, DDP_ERR_INPUT, "the header is not valid JSON (near byte %zu)",
                       ST_PREFIX + at);
    }
    h->json = root;
    int rc = DDP_OK;
    for (size_t i = (size_t)(end - text); i < header_len && rc == DDP_OK; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r')
            rc = err_set(err, DDP_ERR_INPUT,
                         "the header has text after its JSON object (byte %zu)", ST_PREFIX + i);
    if (rc == DDP_OK)
        rc = header_entries(root, h, err);
    if (rc != DDP_OK)
        st_header_free(h);
    return rc;
}

int st_parse(const uint8_t *buf, size_t len, uint64_t file_size, st_header_t *h, char *err)
{
    memset(h, 0, sizeof *h);
    uint64_t n = 0;
    TRY(st_parse_len(buf, len, file_size, &n, err));
    if (len < ST_PREFIX + n)
        return err_set(err, DDP_ERR_INPUT, "the header is not all in the buffer");
    return st_parse_header((const char *)buf + ST_PREFIX, (size_t)n, file_size, h, err);
}

void st_header_free(st_header_t *h)
{
    cJSON_Delete(h->json);
    free(h->t);
    free(h->meta);
    memset(h, 0, sizeof *h);
}

const st_tensor_t *st_find(const st_header_t *h, const char *name)
{
    st_tensor_t key = {.name = name};
    return h->nt ? bsearch(&key, h->t, h->nt, sizeof *h->t, cmp_names) : NULL;
}

const char *st_meta(const st_header_t *h, const char *key)
{
    st_kv_t k = {key, NULL};
    const st_kv_t *f = h->nmeta ? bsearch(&k, h->meta, h->nmeta, sizeof k, cmp_kv) : NULL;
    return f ? f->val : NULL;
}

// ---------------------------------------------------------------------------
// what a reader expects

static bool prefixed(const char *s, const char *prefix)
{
    return prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

int st_expect(const st_header_t *h, const st_expect_t *e, size_t n, const char *ignore_prefix,
              char *err)
{
    char a[NAME_SHOW + 4], s1[96], s2[96];
    for (size_t i = 0; i < n; i++) {
        const st_tensor_t *t = st_find(h, e[i].name);
        if (!t) {
            /* Name a few of what the file does hold: a file from a model with
             * other module names ("fc1.weight") is then obvious. */
            char have[160] = "";
            size_t shown = 0;
            for (size_t j = 0; j < h->nt && shown < 3; j++) {
                if (prefixed(h->t[j].name, ignore_prefix))
                    continue;
                size_t used = strlen(have);
                snprintf(have + used, sizeof have - used, "%s%s", shown ? ", " : "",
                         show(h->t[j].name, a, sizeof a));
                shown++;
            }
            return err_set(err, DDP_ERR_INPUT, "missing tensor '%s' (the file has %s%s)",
                           e[i].name, shown ? have : "no tensors",
                           shown == 3 && h->nt > 3 ? ", ..." : "");
        }
        if (strcmp(t->dtype, "F32") != 0)
            return err_set(err, DDP_ERR_INPUT,
                           "%s has dtype %s; ddpbench reads F32 (float32) only", e[i].name,
                           t->dtype);
        bool same = t->ndim == e[i].ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = t->shape[d] == e[i].shape[d];
        if (!same) {
            st_shape_str(t->ndim, t->shape, s1, sizeof s1);
            st_shape_str(e[i].ndim, e[i].shape, s2, sizeof s2);
            return err_set(err, DDP_ERR_INPUT, "%s has shape %s, the model needs %s", e[i].name,
                           s1, s2);
        }
    }
    /* Every expected name is there (and names are unique): anything more is extra. */
    size_t others = 0;
    for (size_t j = 0; j < h->nt; j++)
        others += !prefixed(h->t[j].name, ignore_prefix);
    if (others == n)
        return DDP_OK;
    const char **want = malloc((n ? n : 1) * sizeof *want);
    if (!want)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < n; i++)
        want[i] = e[i].name;
    qsort(want, n, sizeof *want, cmp_strings);
    int rc = DDP_OK;
    for (size_t j = 0; j < h->nt && rc == DDP_OK; j++) {
        const char *name = h->t[j].name;
        if (!prefixed(name, ignore_prefix) && !bsearch(&name, want, n, sizeof *want, cmp_strings))
            rc = err_set(err, DDP_ERR_INPUT,
                         "extra tensor '%s' that the model does not have (it has %zu tensors)",
                         show(name, a, sizeof a), n);
    }
    free(want);
    return rc;
}

// ---------------------------------------------------------------------------
// reading a file

int st_open(st_file_t *sf, const char *path, char *err)
{
    memset(sf, 0, sizeof *sf);
    FILE *f;
    uint64_t size;
    int rc = infile_fopen(path, &f, &size, err); /* never blocks on a FIFO */
    if (rc != DDP_OK)
        return rc;
    uint8_t pre[ST_PREFIX];
    size_t got = fread(pre, 1, sizeof pre, f);
    uint64_t n = 0;
    rc = st_parse_len(pre, got, size, &n, err);
    if (rc != DDP_OK) {
        fclose(f);
        return rc;
    }
    /* n is at most ST_HEADER_MAX and within the file: a bounded allocation. */
    char *text = malloc(n ? (size_t)n : 1);
    if (!text) {
        fclose(f);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for a %llu-byte header",
                       (unsigned long long)n);
    }
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        fclose(f);
        return err_set(err, DDP_ERR_INPUT, "the file ended inside its header (changed while "
                                           "being read?)");
    }
    rc = st_parse_header(text, (size_t)n, size, &sf->h, err);
    free(text);
    if (rc != DDP_OK) {
        fclose(f);
        return rc;
    }
    sf->f = f;
    sf->size = size;
    return DDP_OK;
}

/* A tensor's hash state after its name, dtype and shape. */
static void tensor_hash_begin(hash64_t *h, const char *name, const char *dtype, int ndim,
                              const uint64_t *shape)
{
    hash64_init(h);
    hash64_update(h, name, strlen(name) + 1);
    hash64_update(h, dtype, strlen(dtype) + 1);
    hash64_u64(h, (uint64_t)ndim);
    for (int d = 0; d < ndim; d++)
        hash64_u64(h, shape[d]);
}

static int seek_tensor(st_file_t *sf, const st_tensor_t *t, char *err)
{
    if (strcmp(t->dtype, "F32") != 0)
        return err_set(err, DDP_ERR_INPUT, "%s has dtype %s, not F32", t->name, t->dtype);
    if (fseeko(sf->f, (off_t)(sf->h.data_start + t->begin), SEEK_SET) != 0)
        return err_set(err, DDP_ERR_INPUT, "cannot seek to %s: %s", t->name, strerror(errno));
    return DDP_OK;
}

int st_read_f32_hashed(st_file_t *sf, const st_tensor_t *t, float *dst, uint64_t *hash,
                       char *err)
{
    TRY(seek_tensor(sf, t, err));
    size_t n = (size_t)t->count;
    if (fread(dst, 4, n, sf->f) != n)
        return err_set(err, DDP_ERR_INPUT,
                       "the file ended inside the data of %s (changed while being read?)",
                       t->name);
    if (hash) {
        hash64_t h;
        tensor_hash_begin(&h, t->name, t->dtype, t->ndim, t->shape);
        hash64_update(&h, dst, n * 4);
        *hash = hash64_final(&h);
    }
    return DDP_OK;
}

int st_read_f32(st_file_t *sf, const st_tensor_t *t, float *dst, char *err)
{
    return st_read_f32_hashed(sf, t, dst, NULL, err);
}

int st_scan_f32(st_file_t *sf, const st_tensor_t *t, uint64_t *hash, uint64_t *first_nonfinite,
                char *err)
{
    TRY(seek_tensor(sf, t, err));
    hash64_t h;
    tensor_hash_begin(&h, t->name, t->dtype, t->ndim, t->shape);
    *first_nonfinite = t->count;
    enum { CHUNK = 1 << 16 }; /* floats per read */
    uint8_t *buf = malloc(CHUNK * 4);
    if (!buf)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    float *f = malloc(CHUNK * sizeof *f);
    if (!f) {
        free(buf);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    }
    int rc = DDP_OK;
    for (uint64_t done = 0; done < t->count && rc == DDP_OK;) {
        size_t k = t->count - done < CHUNK ? (size_t)(t->count - done) : CHUNK;
        if (fread(buf, 4, k, sf->f) != k) {
            rc = err_set(err, DDP_ERR_INPUT,
                         "the file ended inside the data of %s (changed while being read?)",
                         t->name);
            break;
        }
        hash64_update(&h, buf, k * 4);
        st_decode_f32(buf, k, f);
        for (size_t i = 0; i < k && *first_nonfinite == t->count; i++)
            if (!isfinite(f[i]))
                *first_nonfinite = done + i;
        done += k;
    }
    free(buf);
    free(f);
    *hash = hash64_final(&h);
    return rc;
}

typedef struct {
    const char *name;
    uint64_t hash;
} named_hash_t;

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const named_hash_t *)a)->name, ((const named_hash_t *)b)->name);
}

/* The checksum of metadata kv[0..nkv) (the checksum entry skipped) and
 * tensor hashes th[0..nt), both sorted here. */
static uint64_t checksum_of(st_kv_t *kv, size_t nkv, named_hash_t *th, size_t nt)
{
    qsort(kv, nkv, sizeof *kv, cmp_kv);
    qsort(th, nt, sizeof *th, cmp_named);
    hash64_t h;
    hash64_init(&h);
    for (size_t i = 0; i < nkv; i++) {
        if (strcmp(kv[i].key, ST_CHECKSUM_KEY) == 0)
            continue;
        hash64_update(&h, kv[i].key, strlen(kv[i].key) + 1);
        hash64_update(&h, kv[i].val, strlen(kv[i].val) + 1);
    }
    for (size_t i = 0; i < nt; i++)
        hash64_u64(&h, th[i].hash);
    return hash64_final(&h);
}

int st_checksum_check(const st_header_t *h, const char *const *names, const uint64_t *hashes,
                      size_t n, char *err)
{
    const char *want = st_meta(h, ST_CHECKSUM_KEY);
    if (!want)
        return err_set(err, DDP_ERR_INPUT, "__metadata__ has no '%s'", ST_CHECKSUM_KEY);
    if (n != h->nt)
        return err_set(err, DDP_ERR_INPUT, "internal: %zu tensor hashes for %zu tensors", n,
                       h->nt);
    named_hash_t *th = malloc((n ? n : 1) * sizeof *th);
    if (!th)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < n; i++)
        th[i] = (named_hash_t){names[i], hashes[i]};
    uint64_t got = checksum_of(h->meta, h->nmeta, th, n); /* sorted already: sorts nothing */
    free(th);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)got);
    if (strcmp(hex, want) != 0) {
        char shown[40];
        return err_set(err, DDP_ERR_INPUT,
                       "its contents do not match its checksum (%s recorded, %s computed): the "
                       "file was edited or corrupted",
                       text_escape(want, strlen(want), shown, sizeof shown), hex);
    }
    return DDP_OK;
}

void st_close(st_file_t *sf)
{
    if (sf->f)
        fclose(sf->f);
    st_header_free(&sf->h);
    memset(sf, 0, sizeof *sf);
}

// ---------------------------------------------------------------------------
// writing: the header

/* The header text, padded with spaces to a multiple of 8, behind its length:
 * one buffer of 8 + N bytes (malloc'd) ready to write. */
static int build_header(const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
                        uint8_t **out, size_t *out_len, char *err)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && nmeta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        ok = m != NULL;
        for (size_t i = 0; ok && i < nmeta; i++)
            ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].val) != NULL;
    }
    uint64_t off = 0;
    for (size_t i = 0; ok && i < nt; i++) {
        uint64_t count = 1;
        char buf[96];
        size_t o = 0;
        buf[o++] = '[';
        for (int d = 0; d < t[i].ndim; d++) {
            count *= t[i].shape[d];
            o += (size_t)snprintf(buf + o, sizeof buf - o, d ? ",%llu" : "%llu",
                                  (unsigned long long)t[i].shape[d]);
        }
        snprintf(buf + o, sizeof buf - o, "]");
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        ok = e && cJSON_AddStringToObject(e, "dtype", "F32") && cJSON_AddRawToObject(e, "shape", buf);
        /* Offsets as raw integers: exact at any size, never "1e+15". */
        snprintf(buf, sizeof buf, "[%llu,%llu]", (unsigned long long)off,
                 (unsigned long long)(off + 4 * count));
        ok = ok && cJSON_AddRawToObject(e, "data_offsets", buf);
        off += 4 * count;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory building the header");
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint8_t *b = malloc(ST_PREFIX + padded);
    if (!b) {
        cJSON_free(text);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory building the header");
    }
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(b + ST_PREFIX, text, len);
    memset(b + ST_PREFIX + len, ' ', padded - len);
    cJSON_free(text);
    *out = b;
    *out_len = ST_PREFIX + padded;
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// writing: through an atomic file (base/atomic_file.h)

int st_write_into(afile_t *a, const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
                  char *err)
{
    uint8_t *head = NULL;
    size_t head_len = 0;
    TRY(build_header(t, nt, meta, nmeta, &head, &head_len, err));
    afile_write(a, head, head_len);
    free(head);
    for (size_t i = 0; i < nt; i++) {
        uint64_t count = 1;
        for (int d = 0; d < t[i].ndim; d++)
            count *= t[i].shape[d];
        afile_write(a, t[i].data, (size_t)count * sizeof(float));
    }
    return DDP_OK;
}

int st_write(const char *path, const st_out_t *t, size_t nt, const st_kv_t *meta, size_t nmeta,
             bool kill_before_rename, char *err)
{
    afile_t a;
    TRY(afile_open(&a, path, err));
    int rc = st_write_into(&a, t, nt, meta, nmeta, err);
    if (rc != DDP_OK) {
        afile_abort(&a);
        return rc;
    }
    return afile_commit(&a, kill_before_rename, err);
}

int st_write_checksummed(const char *path, const st_out_t *t, size_t nt, const st_kv_t *meta,
                         size_t nmeta, bool kill_before_rename, char *err)
{
    st_kv_t *kv = malloc((nmeta + 1) * sizeof *kv);
    named_hash_t *th = malloc((nt ? nt : 1) * sizeof *th);
    if (!kv || !th) {
        free(kv);
        free(th);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    }
    for (size_t i = 0; i < nt; i++) {
        uint64_t count = 1;
        for (int d = 0; d < t[i].ndim; d++)
            count *= t[i].shape[d];
        hash64_t h;
        tensor_hash_begin(&h, t[i].name, "F32", t[i].ndim, t[i].shape);
        hash64_update(&h, t[i].data, (size_t)count * 4);
        th[i] = (named_hash_t){t[i].name, hash64_final(&h)};
    }
    memcpy(kv, meta, nmeta * sizeof *kv);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)checksum_of(kv, nmeta, th, nt));
    /* the metadata as given, the checksum last */
    memcpy(kv, meta, nmeta * sizeof *kv);
    kv[nmeta] = (st_kv_t){ST_CHECKSUM_KEY, hex};
    int rc = st_write(path, t, nt, kv, nmeta + 1, kill_before_rename, err);
    free(kv);
    free(th);
    return rc;
}
