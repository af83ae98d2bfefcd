/* tests/fuzz/fuzz_safetensors.c: libFuzzer target for the .safetensors reader and
 * writer (common/io/safetensors.c).
 *
 * Each input is taken as a whole .safetensors file and goes through:
 *  1. st_parse from memory, with the true file size and with a file claimed
 *     larger than the bytes at hand; a success must describe exactly the bytes
 *     there are (the tensors tile the data region, sizes agree with shapes,
 *     every name is found), a failure must leave one line in err;
 *  2. st_expect against a small model (0.weight [2, 2], 0.bias [2]), and the
 *     F32 tensors decoded from memory;
 *  3. the file path: the input written to a per-process temp file, st_open,
 *     and every F32 tensor read back, which must equal the in-memory decode;
 *  4. when it parses with only F32 tensors of rank <= 2: written again by
 *     st_write (names, metadata, data) and parsed back, which must give the
 *     same names, shapes, metadata and bits.
 * Any broken invariant traps.  `make test-fuzz` builds and runs it with the
 * seeds in tests/corpus/fuzz_safetensors/.  Built with -DFUZZ_STANDALONE (any
 * C compiler, no libFuzzer) it replays the files named on its command line. */
#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_util.h"


#include "common/io/safetensors.h"

#define MAX_FLOATS ((size_t)1 << 20) /* tensors larger than this are not decoded */

// ----------------------------------------------------------------------------
// invariants of a parsed header

static void check_header(const st_header_t *h, uint64_t file_size)
{
    CHECK(h->data_start == ST_PREFIX + h->header_len);
    CHECK(h->data_start + h->data_len == file_size);
    CHECK(h->header_len <= ST_HEADER_MAX);
    uint64_t covered = 0;
    for (size_t i = 0; i < h->nt; i++) {
        const st_tensor_t *t = &h->t[i];
        CHECK(t->name && t->dtype && t->bits > 0);
        CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
        uint64_t count = 1;
        for (int d = 0; d < t->ndim; d++)
            count *= t->shape[d];
        CHECK(count == t->count);
        CHECK(t->begin <= t->end && t->end <= h->data_len);
        CHECK(t->end - t->begin == t->count * t->bits / 8);
        CHECK(st_find(h, t->name) == t);
        if (i)
            CHECK(strcmp(h->t[i - 1].name, t->name) < 0); /* sorted, no duplicates */
        covered += t->end - t->begin;
    }
    CHECK(covered == h->data_len); /* tiled: no gap, no overlap */
    for (size_t i = 0; i < h->nmeta; i++) {
        CHECK(h->meta[i].key && h->meta[i].val);
        CHECK(st_meta(h, h->meta[i].key) == h->meta[i].val);
    }
    char s[64];
    for (size_t i = 0; i < h->nt; i++) {
        st_shape_str(h->t[i].ndim, h->t[i].shape, s, sizeof s);
        CHECK(s[0] == '[' && strlen(s) < sizeof s);
    }
}

/* 4: write the parsed tensors and metadata again and read them back. */
static void round_trip(const st_header_t *h, float *const *vals)
{
    st_out_t *out = calloc(h->nt ? h->nt : 1, sizeof *out);
    st_kv_t *meta = calloc(h->nmeta ? h->nmeta : 1, sizeof *meta);
    CHECK(out && meta);
    for (size_t i = 0; i < h->nt; i++) {
        const st_tensor_t *t = &h->t[i];
        out[i] = (st_out_t){t->name, t->ndim, {t->ndim > 0 ? t->shape[0] : 0, t->ndim > 1 ? t->shape[1] : 0},
                            vals[i]};
    }
    for (size_t i = 0; i < h->nmeta; i++)
        meta[i] = h->meta[i];
    char err[ERR_LEN] = "";
    CHECK(st_write(fuzz_temp_path("_w.safetensors"), out, h->nt, meta, h->nmeta, false, err) == DDP_OK);
    st_file_t sf;
    int rc = st_open(&sf, fuzz_temp_path("_w.safetensors"), err);
    if (rc != DDP_OK)
        fprintf(stderr, "fuzz_safetensors: rewritten file rejected: %s\n", err);
    CHECK(rc == DDP_OK);
    CHECK(sf.h.nt == h->nt && sf.h.nmeta == h->nmeta);
    CHECK(sf.h.header_len % 8 == 0);
    for (size_t i = 0; i < h->nmeta; i++)
        CHECK(strcmp(st_meta(&sf.h, h->meta[i].key), h->meta[i].val) == 0);
    for (size_t i = 0; i < h->nt; i++) {
        const st_tensor_t *a = &h->t[i], *b = st_find(&sf.h, a->name);
        CHECK(b != NULL && b->ndim == a->ndim && b->count == a->count);
        for (int d = 0; d < a->ndim; d++)
            CHECK(a->shape[d] == b->shape[d]);
        float *back = malloc((b->count ? b->count : 1) * sizeof(float));
        CHECK(back != NULL);
        CHECK(st_read_f32(&sf, b, back, err) == DDP_OK);
        CHECK(memcmp(back, vals[i], b->count * sizeof(float)) == 0);
        free(back);
    }
    st_close(&sf);
    free(out);
    free(meta);
}

// ----------------------------------------------------------------------------
// the target

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[ERR_LEN] = "";

    /* 1. from memory */
    st_header_t h;
    int rc = st_parse(data, size, size, &h, err);
    if (rc != DDP_OK) {
        CHECK(rc == DDP_ERR_INPUT);
        fuzz_check_err(err);
        CHECK(h.t == NULL && h.json == NULL);
    } else {
        check_header(&h, size);
    }
    st_header_t h2;
    char err2[ERR_LEN] = "";
    if (st_parse(data, size, (uint64_t)size + 4096, &h2, err2) == DDP_OK) {
        check_header(&h2, (uint64_t)size + 4096);
        st_header_free(&h2);
    } else {
        fuzz_check_err(err2);
    }
    if (rc != DDP_OK) {
        /* 3, for failures too: the file reader fails the same way, same words */
        fuzz_write_bytes(fuzz_temp_path(".safetensors"), data, size);
        st_file_t sf;
        err2[0] = '\0';
        CHECK(st_open(&sf, fuzz_temp_path(".safetensors"), err2) == rc);
        CHECK(strcmp(err, err2) == 0);
        return 0;
    }

    /* 2. what a model loader does */
    static const st_expect_t want[] = {{"0.weight", 2, {2, 2}}, {"0.bias", 1, {2, 0}}};
    err[0] = '\0';
    if (st_expect(&h, want, 2, NULL, err) != DDP_OK)
        fuzz_check_err(err);
    err[0] = '\0';
    if (st_expect(&h, want, 2, "optim.", err) != DDP_OK)
        fuzz_check_err(err);

    bool all_small_f32 = true;
    float **vals = calloc(h.nt ? h.nt : 1, sizeof *vals);
    CHECK(vals != NULL);
    for (size_t i = 0; i < h.nt; i++) {
        const st_tensor_t *t = &h.t[i];
        if (strcmp(t->dtype, "F32") != 0 || t->count > MAX_FLOATS || t->ndim > 2) {
            all_small_f32 = false;
            continue;
        }
        vals[i] = malloc((t->count ? t->count : 1) * sizeof(float));
        CHECK(vals[i] != NULL);
        st_decode_f32(data + h.data_start + t->begin, (size_t)t->count, vals[i]);
    }

    /* 3. the same bytes as a file */
    fuzz_write_bytes(fuzz_temp_path(".safetensors"), data, size);
    st_file_t sf;
    CHECK(st_open(&sf, fuzz_temp_path(".safetensors"), err) == DDP_OK);
    CHECK(sf.h.nt == h.nt && sf.h.nmeta == h.nmeta && sf.h.data_start == h.data_start);
    for (size_t i = 0; i < h.nt; i++) {
        if (!vals[i])
            continue;
        const st_tensor_t *t = st_find(&sf.h, h.t[i].name);
        CHECK(t != NULL && t->begin == h.t[i].begin);
        float *f = malloc((t->count ? t->count : 1) * sizeof(float));
        CHECK(f != NULL);
        CHECK(st_read_f32(&sf, t, f, err) == DDP_OK);
        CHECK(memcmp(f, vals[i], t->count * sizeof(float)) == 0);
        free(f);
    }
    st_close(&sf);

    /* 4. write it again */
    if (all_small_f32)
        round_trip(&h, vals);

    for (size_t i = 0; i < h.nt; i++)
        free(vals[i]);
    free(vals);
    st_header_free(&h);
    return 0;
}

// ----------------------------------------------------------------------------
// replay without libFuzzer: fuzz_safetensors FILE...
