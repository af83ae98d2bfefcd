/* tests/unit/test_checkpoint.c: Criterion suite for .safetensors files
 * (common/io/safetensors.c), weights and checkpoints (common/io/checkpoint.c) and
 * resuming in every mode.
 *
 *  st       the writer's exact bytes, round trips, atomic replacement (a
 *           writer killed before its rename leaves the old file and a
 *           temporary the next write removes), file mode, error cleanup;
 *  bad      malformed files, each rejected with DDP_ERR_INPUT and one line
 *           naming the file and the problem;
 *  weights  --save / --init: names, shapes, the shape-mismatch message;
 *  resume   a run stopped after K steps and resumed to N ends bit for bit
 *           where the run that never stopped ends (SGD+momentum, Nesterov,
 *           Adam, AdamW, accumulation, inside an epoch and at its end), and
 *           every setting a resume must keep is checked; the same in DP (2 and
 *           3 devices) and DDP (2 and 3 ranks), which write from device 0 /
 *           rank 0. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "testutil.h"
#include "tu_flip.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base/atomic_file.h"
#include "common/base/hash.h"
#include "common/config/fields.h"
#include "common/io/checkpoint.h"
#include "common/nn/optim.h"
#include "common/io/safetensors.h"
#include "tmpdir.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the fixtures are written with memcpy and assume a little-endian host"
#endif

// ----------------------------------------------------------------------------
// fixtures: a temp dir per test

static void dir_setup(void) { tmpdir_make("ddp_ckpt"); }
static void dir_teardown(void) { tmpdir_remove(); }

TestSuite(st, .init = dir_setup, .fini = dir_teardown);
TestSuite(bad, .init = dir_setup, .fini = dir_teardown);
TestSuite(weights, .init = dir_setup, .fini = dir_teardown);
TestSuite(resume, .init = dir_setup, .fini = dir_teardown);

static const char *path_in(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmp_dir, name);
    return buf;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len ? (size_t)len : 1);
    cr_assert_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    if (n)
        cr_assert_eq(fwrite(b, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* A .safetensors file by hand: the length field says claimed (or the JSON's
 * length when claimed is ~0), then the JSON, then data_len bytes 0x01.. */
static void mk_st(const char *path, uint64_t claimed, const char *json, size_t data_len)
{
    size_t jl = strlen(json);
    uint64_t n = claimed == ~(uint64_t)0 ? jl : claimed;
    uint8_t *b = malloc(8 + jl + data_len + 1);
    memcpy(b, &n, 8);
    memcpy(b + 8, json, jl);
    for (size_t i = 0; i < data_len; i++)
        b[8 + jl + i] = (uint8_t)(i + 1);
    spit(path, b, 8 + jl + data_len);
    free(b);
}

static int count_temps(const char *base)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, ".%s.tmp.", base);
    DIR *d = opendir(tmp_dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

// ----------------------------------------------------------------------------
// st: the format itself

Test(st, writer_bytes_are_the_format_exactly)
{
    char p[512];
    path_in(p, sizeof p, "one.safetensors");
    float one = 1.0f;
    st_out_t t = {"0.weight", 2, {1, 1}, &one};
    char err[ERR_LEN];
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
    const char *json = "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    size_t n;
    uint8_t *b = slurp(p, &n);
    cr_assert_eq(n, 8 + padded + 4);
    uint64_t len;
    memcpy(&len, b, 8);
    cr_assert_eq(len, padded, "header length %llu, expected %zu", (unsigned long long)len, padded);
    cr_assert(memcmp(b + 8, json, jl) == 0, "header: %.*s", (int)jl, (const char *)b + 8);
    for (size_t i = jl; i < padded; i++)
        cr_assert_eq(b[8 + i], ' ', "padding byte %zu is 0x%02x", i, b[8 + i]);
    const uint8_t le_one[4] = {0x00, 0x00, 0x80, 0x3f};
    cr_assert(memcmp(b + 8 + padded, le_one, 4) == 0);
    free(b);
}

Test(st, round_trip_keeps_names_shapes_metadata_and_bits)
{
    char p[512], err[ERR_LEN];
    path_in(p, sizeof p, "rt.safetensors");
    float a[12], bias[5], none[1] = {0};
    for (int i = 0; i < 12; i++)
        a[i] = (float)i * -0.37f + 1e-30f * (float)i;
    for (int i = 0; i < 5; i++)
        bias[i] = 1.0f / (float)(i + 3);
    a[3] = -0.0f;
    st_out_t t[] = {{"w", 2, {3, 4}, a}, {"b", 1, {5}, bias}, {"empty", 2, {0, 3}, none}};
    st_kv_t meta[] = {{"layers", "4,3"}, {"quote", "a\"b\\c"}, {"unicode", "\xc3\xa9t\xc3\xa9"}};
    cr_assert_eq(st_write(p, t, 3, meta, 3, false, err), DDP_OK, "%s", err);

    st_file_t sf;
    cr_assert_eq(st_open(&sf, p, err), DDP_OK, "%s", err);
    cr_assert_eq(sf.h.nt, 3);
    cr_assert_eq(sf.h.header_len % 8, 0, "the header is padded to 8 bytes");
    cr_assert_str_eq(st_meta(&sf.h, "layers"), "4,3");
    cr_assert_str_eq(st_meta(&sf.h, "quote"), "a\"b\\c");
    cr_assert_str_eq(st_meta(&sf.h, "unicode"), "\xc3\xa9t\xc3\xa9");
    cr_assert_null(st_meta(&sf.h, "absent"));
    const st_tensor_t *w = st_find(&sf.h, "w"), *b = st_find(&sf.h, "b"), *e = st_find(&sf.h, "empty");
    cr_assert(w && b && e);
    cr_assert_eq(w->ndim, 2);
    cr_assert_eq(w->shape[0], 3);
    cr_assert_eq(w->shape[1], 4);
    cr_assert_eq(w->begin, 0, "data in the order given");
    cr_assert_eq(b->begin, 48);
    cr_assert_eq(e->count, 0);
    cr_assert_str_eq(w->dtype, "F32");
    float ra[12], rb[5];
    cr_assert_eq(st_read_f32(&sf, w, ra, err), DDP_OK, "%s", err);
    cr_assert_eq(st_read_f32(&sf, b, rb, err), DDP_OK, "%s", err);
    cr_assert(memcmp(ra, a, sizeof a) == 0, "w bits differ");
    cr_assert(memcmp(rb, bias, sizeof bias) == 0, "b bits differ");
    st_close(&sf);
}

Test(st, reads_a_file_in_the_reference_writers_layout)
{
    /* huggingface/safetensors sorts by dtype then name and puts __metadata__
     * first: "0.bias" before "0.weight", data in that order. */
    char p[512], err[ERR_LEN];
    path_in(p, sizeof p, "ref.safetensors");
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    uint8_t buf[512];
    uint64_t n = padded;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, json, jl);
    memset(buf + 8 + jl, ' ', padded - jl);
    float vals[8] = {10, 20, 1, 2, 3, 4, 5, 6}; /* bias, then weight */
    memcpy(buf + 8 + padded, vals, sizeof vals);
    spit(p, buf, 8 + padded + sizeof vals);

    model_spec_t spec;
    int dims[] = {3, 2};
    cr_assert_eq(model_spec_init(&spec, dims, 2, ACT_RELU, err), DDP_OK);
    float params[8];
    cr_assert_eq(ckpt_load_weights(p, "--init", &spec, params, err), DDP_OK, "%s", err);
    const float want[8] = {1, 2, 3, 4, 5, 6, 10, 20}; /* our arena: W then b */
    cr_assert(memcmp(params, want, sizeof want) == 0);
}

Test(st, killed_before_rename_keeps_the_old_file)
{
    char p[512], err[ERR_LEN];
    path_in(p, sizeof p, "w.safetensors");
    float v[4] = {1, 1, 1, 1};
    st_out_t t = {"x", 1, {4}, v};
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
    size_t n0;
    uint8_t *old = slurp(p, &n0);

    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        float w[4] = {2, 2, 2, 2};
        st_out_t t2 = {"x", 1, {4}, w};
        st_write(p, &t2, 1, NULL, 0, true, err);
        _exit(0); /* not reached: the writer kills itself before its rename */
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
    size_t n1;
    uint8_t *now = slurp(p, &n1);
    cr_assert(n1 == n0 && memcmp(old, now, n0) == 0, "the old file changed");
    cr_assert_eq(count_temps("w.safetensors"), 1, "the dead writer's temporary is there");
    free(old);
    free(now);

    /* The next write replaces the file and removes the dead writer's temporary. */
    float w3[4] = {3, 3, 3, 3};
    st_out_t t3 = {"x", 1, {4}, w3};
    cr_assert_eq(st_write(p, &t3, 1, NULL, 0, false, err), DDP_OK, "%s", err);
    cr_assert_eq(count_temps("w.safetensors"), 0);
    st_file_t sf;
    cr_assert_eq(st_open(&sf, p, err), DDP_OK, "%s", err);
    float r[4];
    cr_assert_eq(st_read_f32(&sf, st_find(&sf.h, "x"), r, err), DDP_OK);
    cr_assert_eq(r[0], 3.0f);
    st_close(&sf);
}

Test(st, new_files_get_the_umask_mode)
{
    char p[512], err[ERR_LEN];
    float v = 0;
    st_out_t t = {"x", 1, {1}, &v};
    mode_t old = umask(022);
    cr_assert_eq(st_write(path_in(p, sizeof p, "a.st"), &t, 1, NULL, 0, false, err), DDP_OK);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644, "mode %o", st.st_mode & 0777);
    umask(077);
    cr_assert_eq(st_write(path_in(p, sizeof p, "b.st"), &t, 1, NULL, 0, false, err), DDP_OK);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    umask(old);
}

/* A file replaced keeps its permissions (and its owner and group where the
 * process may: root, as the tests run, any), whatever the umask would give
 * a new one: a private 0600 --save or --checkpoint came back 0644. */
Test(st, replaced_files_keep_their_mode_and_owner)
{
    char p[512], err[ERR_LEN];
    float v = 0;
    st_out_t t = {"x", 1, {1}, &v};
    static const mode_t modes[] = {0600, 0640, 0604, 0400, 0755, 0666};
    static const mode_t masks[] = {022, 077, 0};
    mode_t old = umask(022);
    for (size_t m = 0; m < sizeof masks / sizeof *masks; m++) {
        umask(masks[m]);
        for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
            path_in(p, sizeof p, "kept.st");
            unlink(p);
            cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
            cr_assert_eq(chmod(p, modes[i]), 0);
            uid_t uid = geteuid() == 0 ? 4321 : geteuid();
            gid_t gid = geteuid() == 0 ? 4322 : getegid();
            cr_assert_eq(chown(p, uid, gid), 0, "%s", strerror(errno));
            cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
            struct stat st;
            cr_assert_eq(stat(p, &st), 0);
            cr_assert_eq(st.st_mode & 07777, modes[i], "umask %03o: a %04o file came back %04o",
                         masks[m], modes[i], st.st_mode & 07777);
            cr_assert(st.st_uid == uid && st.st_gid == gid, "owner %d:%d, was %d:%d",
                      (int)st.st_uid, (int)st.st_gid, (int)uid, (int)gid);
        }
    }
    /* a new file still gets the umask's mode */
    umask(027);
    cr_assert_eq(st_write(path_in(p, sizeof p, "fresh.st"), &t, 1, NULL, 0, false, err), DDP_OK);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);
    umask(old);
}

/* --emit-pytorch's set (afile_commit_set, by exchange) keeps each file's mode too. */
Test(st, a_replaced_set_keeps_each_mode)
{
    char p[2][512], err[ERR_LEN];
    afile_t f[2];
    static const char *names[2] = {"s.py", "s.x.npy"};
    static const mode_t modes[2] = {0700, 0600};
    mode_t old = umask(0);
    for (int i = 0; i < 2; i++) {
        FILE *o = fopen(path_in(p[i], sizeof p[i], names[i]), "w");
        cr_assert(o);
        fclose(o);
        cr_assert_eq(chmod(p[i], modes[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(afile_open(&f[i], p[i], err), DDP_OK, "%s", err);
        afile_write(&f[i], "new", 3);
    }
    cr_assert_eq(afile_commit_set(f, 2, err), DDP_OK, "%s", err);
    for (int i = 0; i < 2; i++) {
        struct stat st;
        cr_assert_eq(stat(p[i], &st), 0);
        cr_assert_eq(st.st_size, 3);
        cr_assert_eq(st.st_mode & 07777, modes[i], "%s: %04o came back %04o", names[i], modes[i],
                     st.st_mode & 07777);
    }
    umask(old);
}

Test(st, failed_writes_leave_no_temporary)
{
    char p[512], err[ERR_LEN];
    float v = 0;
    st_out_t t = {"x", 1, {1}, &v};
    /* the target is a directory: the rename fails after the temporary was written */
    path_in(p, sizeof p, "adir");
    cr_assert_eq(mkdir(p, 0755), 0);
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_ERR_INPUT);
    cr_assert_eq(count_temps("adir"), 0, "temporary left behind");
    cr_assert_eq(afile_check(p, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "is a directory"), "%s", err);
    /* no such directory */
    cr_assert_eq(st_write("/nonexistent-ddpbench-dir/w.st", &t, 1, NULL, 0, false, err),
                 DDP_ERR_INPUT);
    cr_assert(strstr(err, "cannot create a file in directory '/nonexistent-ddpbench-dir'"), "%s",
              err);
    cr_assert_eq(afile_check("/nonexistent-ddpbench-dir/w.st", err), DDP_ERR_INPUT);
    cr_assert_eq(afile_check(path_in(p, sizeof p, "fine.st"), err), DDP_OK, "%s", err);
    cr_assert_eq(access(p, F_OK), -1, "the check leaves nothing behind");
    cr_assert_eq(count_temps("fine.st"), 0);
}

Test(st, optimizer_state_round_trips_through_the_host)
{
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    optim_cfg_t cfg = {.kind = OPTIM_ADAM, .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    optim_t o;
    cr_assert_eq(optim_init(&o, be, &cfg, 7, err), DDP_OK);
    cr_assert_eq(optim_state_count(&o), 2);
    float in[2][7], out[2][7];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 7; i++)
            in[k][i] = (float)(k * 10 + i) * 0.1f;
    for (int k = 0; k < 2; k++)
        cr_assert_eq(optim_state_upload(&o, k, in[k]), DDP_OK);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(optim_state_download(&o, k, out[k]), DDP_OK);
    cr_assert(memcmp(in, out, sizeof in) == 0);
    cr_assert_neq(optim_state_download(&o, 2, out[0]), DDP_OK, "there is no third arena");
    optim_free(&o);
    backend_destroy(be);
}

// ----------------------------------------------------------------------------
// bad: malformed files, through --init of a model 2 -> 2 (0.weight [2, 2], 0.bias [2])

#define W16 "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"
#define B24 "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}"

typedef struct {
    const char *what;
    const char *json;
    size_t data_len;
    const char *expect;
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"invalid JSON", "{" W16 ",", 24, "not valid JSON"},
    {"not an object", "[1,2]", 0, "not a JSON object"},
    {"text after the JSON", "{" W16 "," B24 "} x", 24, "text after its JSON object"},
    {"overlapping offsets",
     "{" W16 ",\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
     "tensors '0.weight' [0, 16] and '0.bias' [8, 16] overlap"},
    {"offsets past the end", "{" W16 "," B24 "}", 20,
     "tensor '0.bias': data_offsets [16, 24] run past the end of the data (20 bytes)"},
    {"a gap", "{" W16 ",\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[20,28]}}",
     28, "bytes 16..20 of the data belong to no tensor"},
    {"trailing bytes", "{" W16 "," B24 "}", 32, "8 bytes after the last tensor"},
    {"size against shape",
     "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}," B24 "}", 24,
     "data_offsets [0, 12] hold 12 bytes, shape [2, 2] of F32 needs 16"},
    {"end before begin",
     "{" W16 ",\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,16]}}", 24,
     "end before they begin"},
    {"dtype F16",
     "{\"0.weight\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
     "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
     16, "0.weight has dtype F16; ddpbench reads F32"},
    {"dtype I64",
     "{\"0.weight\":{\"dtype\":\"I64\",\"shape\":[2,2],\"data_offsets\":[0,32]},"
     "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]}}",
     40, "0.weight has dtype I64"},
    {"unknown dtype", "{\"0.weight\":{\"dtype\":\"F17\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
     16, "unknown dtype 'F17'"},
    {"wrong shape",
     "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
     "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}",
     32, "0.weight has shape [2, 3], the model needs [2, 2]"},
    {"wrong rank",
     "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}," B24 "}", 24,
     "0.weight has shape [4], the model needs [2, 2]"},
    {"missing tensor", "{" W16 "}", 16, "missing tensor '0.bias' (the file has 0.weight)"},
    {"extra tensor",
     "{" W16 "," B24 ",\"extra\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}", 28,
     "extra tensor 'extra'"},
    {"other module names",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
     "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
     24, "missing tensor '0.weight' (the file has fc.bias, fc.weight)"},
    {"non-string metadata", "{\"__metadata__\":{\"layers\":2}," W16 "," B24 "}", 24,
     "__metadata__ value of 'layers' is not a string"},
    {"metadata not an object", "{\"__metadata__\":\"x\"," W16 "," B24 "}", 24,
     "__metadata__ is not a JSON object"},
    {"duplicate metadata key", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}," W16 "," B24 "}", 24,
     "__metadata__ names 'a' twice"},
    {"duplicate tensor", "{" W16 "," W16 "," B24 "}", 24, "names tensor '0.weight' twice"},
    {"negative dimension",
     "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[-2,2],\"data_offsets\":[0,16]}}", 16,
     "shape holds something other than a non-negative integer"},
    {"fractional dimension",
     "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1.5,2],\"data_offsets\":[0,16]}}", 16,
     "shape holds something other than a non-negative integer"},
    {"shape overflow",
     "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
     "\"data_offsets\":[0,16]}}",
     16, "overflows"},
    {"nine dimensions",
     "{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     "more than 8 dimensions"},
    {"one offset", "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0]}}", 16,
     "data_offsets is not a list of two non-negative integers"},
    {"no dtype", "{\"0.weight\":{\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, "has no dtype"},
    {"unknown field",
     "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],\"foo\":1}}", 16,
     "unknown field 'foo'"},
    {"tensor not an object", "{\"0.weight\":5}", 0, "tensor '0.weight' is not a JSON object"},
    {"invalid UTF-8", "{\"0.w\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "not valid UTF-8"},
    {"overlong UTF-8", "{\"0.w\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
     4, "not valid UTF-8"},
    {"NUL escape", "{\"0.weight\\u0000x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
     16, "\\u0000"},
    {"control character", "{\"0.w\x01\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
     4, "control character 0x01"},
    {"empty header", "", 0, "not valid JSON"},
};

static void expect_bad(const char *path, const char *what, const char *expect)
{
    char err[ERR_LEN] = "";
    model_spec_t spec;
    int dims[] = {2, 2};
    cr_assert_eq(model_spec_init(&spec, dims, 2, ACT_RELU, err), DDP_OK);
    float params[6];
    int rc = ckpt_load_weights(path, "--init", &spec, params, err);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "--init %s: ", path);
    cr_expect_eq(rc, DDP_ERR_INPUT, "%s: rc %d (%s)", what, rc, err);
    cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "%s: message does not name the file: %s",
              what, err);
    cr_expect(strstr(err, expect) != NULL, "%s: expected '%s' in: %s", what, expect, err);
    cr_expect(strchr(err, '\n') == NULL, "%s: message is more than one line", what);
}

Test(bad, malformed_headers_are_each_rejected_with_their_message)
{
    char p[512];
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case_t *c = &bad_cases[i];
        char name[64];
        snprintf(name, sizeof name, "bad%zu.safetensors", i);
        mk_st(path_in(p, sizeof p, name), ~(uint64_t)0, c->json, c->data_len);
        expect_bad(p, c->what, c->expect);
    }
}

Test(bad, broken_length_fields_and_short_files)
{
    char p[512];
    spit(path_in(p, sizeof p, "empty.safetensors"), "", 0);
    expect_bad(p, "empty", "the file is empty");
    spit(path_in(p, sizeof p, "short.safetensors"), "\x10\0\0\0\0", 5);
    expect_bad(p, "5 bytes", "the file is 5 bytes, too short for the 8-byte header length");
    mk_st(path_in(p, sizeof p, "absurd.safetensors"), (uint64_t)1 << 40, "{}", 0);
    expect_bad(p, "absurd length", "header length 1099511627776 is absurd");
    mk_st(path_in(p, sizeof p, "past.safetensors"), 1000, "{" W16 "," B24 "}", 24);
    expect_bad(p, "length past the end", "header length 1000 runs past the end of the file");
    mk_st(path_in(p, sizeof p, "max.safetensors"), ~(uint64_t)0 - 1, "{}", 0);
    expect_bad(p, "length 2^64-2", "is absurd");
    expect_bad(path_in(p, sizeof p, "missing.safetensors"), "missing file",
               "cannot open: No such file or directory");
    expect_bad(tmp_dir, "a directory", "not a regular file");
}

Test(bad, truncated_files_are_caught_wherever_they_end)
{
    char p[512], q[512], err[ERR_LEN];
    model_spec_t spec;
    int dims[] = {2, 2};
    cr_assert_eq(model_spec_init(&spec, dims, 2, ACT_RELU, err), DDP_OK);
    config_t cfg;
    config_defaults(&cfg);
    float params[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(ckpt_save_weights(path_in(p, sizeof p, "good.safetensors"), &cfg, &spec, params,
                                   err),
                 DDP_OK, "%s", err);
    size_t n;
    uint8_t *b = slurp(p, &n);
    for (size_t cut = 0; cut < n; cut++) {
        char name[64];
        snprintf(name, sizeof name, "cut%zu.safetensors", cut);
        spit(path_in(q, sizeof q, name), b, cut);
        const char *expect = cut == 0 ? "empty" : cut < 8 ? "too short" : cut < n - 24 ? "runs past the end of the file" : "run past the end of the data";
        expect_bad(q, "truncated", expect);
    }
    free(b);
}

// ----------------------------------------------------------------------------
// weights: --save and --init

static void spec_of(model_spec_t *spec, const char *layers)
{
    int dims[MODEL_MAX_LAYERS + 1], n;
    char err[ERR_LEN];
    cr_assert_eq(config_parse_int_list(layers, dims, MODEL_MAX_LAYERS + 1, &n, "layers", true, err),
                 DDP_OK);
    cr_assert_eq(model_spec_init(spec, dims, n, ACT_RELU, err), DDP_OK);
}

Test(weights, sequential_names_and_shapes)
{
    char p[512], err[ERR_LEN];
    model_spec_t spec;
    spec_of(&spec, "5,4,3,2");
    float *params = malloc(spec.nparams * sizeof(float));
    model_init_params(&spec, 7, params);
    config_t cfg;
    config_defaults(&cfg);
    cr_assert_eq(ckpt_save_weights(path_in(p, sizeof p, "w.safetensors"), &cfg, &spec, params, err),
                 DDP_OK, "%s", err);
    st_file_t sf;
    cr_assert_eq(st_open(&sf, p, err), DDP_OK, "%s", err);
    cr_assert_eq(sf.h.nt, 6);
    const char *names[] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
    const uint64_t shapes[][2] = {{4, 5}, {4, 0}, {3, 4}, {3, 0}, {2, 3}, {2, 0}};
    uint64_t at = 0;
    for (int i = 0; i < 6; i++) {
        const st_tensor_t *t = st_find(&sf.h, names[i]);
        cr_assert_not_null(t, "no %s", names[i]);
        cr_assert_eq(t->ndim, i % 2 ? 1 : 2, "%s rank", names[i]);
        cr_assert_eq(t->shape[0], shapes[i][0]);
        if (i % 2 == 0)
            cr_assert_eq(t->shape[1], shapes[i][1]);
        cr_assert_eq(t->begin, at, "%s: data in parameter order", names[i]);
        at = t->end;
    }
    cr_assert_str_eq(st_meta(&sf.h, "layers"), "5,4,3,2");
    cr_assert_str_eq(st_meta(&sf.h, "act"), "relu");
    cr_assert_str_eq(st_meta(&sf.h, "format"), "pt");
    st_close(&sf);

    float *back = calloc(spec.nparams, sizeof(float));
    cr_assert_eq(ckpt_load_weights(p, "--init", &spec, back, err), DDP_OK, "%s", err);
    cr_assert(memcmp(back, params, spec.nparams * sizeof(float)) == 0);
    free(back);
    free(params);
}

Test(weights, shapes_are_checked_against_the_model)
{
    char p[512], err[ERR_LEN];
    model_spec_t spec, other;
    spec_of(&spec, "5,4,3");
    float *params = calloc(spec.nparams, sizeof(float));
    config_t cfg;
    config_defaults(&cfg);
    cr_assert_eq(ckpt_save_weights(path_in(p, sizeof p, "w.safetensors"), &cfg, &spec, params, err),
                 DDP_OK, "%s", err);
    float *buf = calloc(4096, sizeof(float));
    char want[1024];
    spec_of(&other, "6,4,3");
    cr_assert_eq(ckpt_load_weights(p, "--init", &other, buf, err), DDP_ERR_INPUT);
    snprintf(want, sizeof want, "--init %s: 0.weight has shape [4, 5], the model needs [4, 6]", p);
    cr_assert_str_eq(err, want);
    spec_of(&other, "5,4");
    cr_assert_eq(ckpt_load_weights(p, "--init", &other, buf, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "extra tensor '2.bias'"), "%s", err);
    spec_of(&other, "5,4,3,2");
    cr_assert_eq(ckpt_load_weights(p, "--init", &other, buf, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "missing tensor '4.weight'"), "%s", err);
    free(buf);
    free(params);
}

Test(weights, init_trains_from_the_file)
{
    char p[512], args[1024], err[ERR_LEN];
    run_result_t a, b;
    /* a 3-step run, saved; then --init from it with lr 0: the weights come back unchanged */
    cr_assert_eq(tu_run("--layers 6,5,3 --loss ce --samples 60 --batch 10 --steps 3 --backend cpu --mode single "
                        "--quiet",
                        &a, err),
                 DDP_OK, "%s", err);
    model_spec_t spec;
    spec_of(&spec, "6,5,3");
    config_t cfg;
    config_defaults(&cfg);
    cr_assert_eq(ckpt_save_weights(path_in(p, sizeof p, "w.safetensors"), &cfg, &spec, a.params,
                                   err),
                 DDP_OK, "%s", err);
    snprintf(args, sizeof args,
             "--layers 6,5,3 --loss ce --samples 60 --batch 10 --steps 2 --optim sgd --lr 0 "
             "--backend cpu --mode single --quiet --init %s",
             p);
    cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s", err);
    cr_assert_eq(a.checksum.bits, b.checksum.bits);
    result_free(&a);
    result_free(&b);
}

// ----------------------------------------------------------------------------
// resume: bit-exact continuation (single mode here, DP and DDP below)

static void resume_equals_straight(const char *common, long k, long n, const char *extra_b)
{
    char ck[512], args[1024], err[ERR_LEN];
    path_in(ck, sizeof ck, "ck.safetensors");
    run_result_t a, b, c;
    snprintf(args, sizeof args, "%s --steps %ld", common, n);
    cr_assert_eq(tu_run(args, &a, err), DDP_OK, "%s: %s", args, err);
    snprintf(args, sizeof args, "%s --steps %ld --checkpoint %s %s", common, k, ck, extra_b);
    cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s: %s", args, err);
    snprintf(args, sizeof args, "%s --steps %ld --resume %s", common, n, ck);
    cr_assert_eq(tu_run(args, &c, err), DDP_OK, "%s: %s", args, err);

    cr_assert_eq(c.nparams, a.nparams);
    cr_assert(memcmp(c.params, a.params, a.nparams * sizeof(float)) == 0,
              "%s: stopped at %ld and resumed to %ld differs from straight (max rel %.3g)", common,
              k, n, max_rel_diff(c.params, a.params, a.nparams, 1e-3));
    cr_assert_eq(c.checksum.bits, a.checksum.bits);
    cr_assert_eq(c.steps, n - k, "the resumed run runs the remaining steps");
    cr_assert_eq(c.final_loss, a.final_loss);
    /* with --log-every 1 the resumed run logs exactly the tail of the straight one */
    cr_assert_eq(c.log.n, n - k);
    for (long i = 0; i < c.log.n; i++) {
        cr_assert_eq(c.log.pt[i].step, a.log.pt[k + i].step);
        cr_assert_eq(c.log.pt[i].epoch, a.log.pt[k + i].epoch);
        cr_assert_eq(c.log.pt[i].loss, a.log.pt[k + i].loss, "loss of step %ld", c.log.pt[i].step);
    }

    /* the checkpoint holds the K-step run's parameters */
    st_file_t sf;
    cr_assert_eq(st_open(&sf, ck, err), DDP_OK, "%s", err);
    char gs[32];
    snprintf(gs, sizeof gs, "%ld", k);
    cr_assert_str_eq(st_meta(&sf.h, "global_step"), gs);
    cr_assert_str_eq(st_meta(&sf.h, "optim_step"), gs);
    st_close(&sf);
    model_spec_t spec;
    config_t cfg;
    snprintf(args, sizeof args, "%s --steps %ld", common, n);
    cr_assert_eq(tu_parse(&cfg, args, err), DDP_OK);
    cr_assert_eq(config_model_spec(&cfg, &spec, err), DDP_OK);
    float *w = malloc(spec.nparams * sizeof(float));
    cr_assert_eq(ckpt_load_weights(ck, "--init", &spec, w, err), DDP_OK, "%s", err);
    cr_assert(memcmp(w, b.params, spec.nparams * sizeof(float)) == 0);
    free(w);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

/* 120 samples in batches of 12: 10 steps per epoch. */
#define CE "--layers 8,16,3 --act relu --loss ce --samples 120 --batch 12 --backend cpu --mode single --quiet --log-every 1"

Test(resume, sgd_momentum_inside_an_epoch)
{
    resume_equals_straight(CE " --optim sgd --lr 0.1 --momentum 0.9", 7, 23, "");
}

Test(resume, sgd_momentum_at_an_epoch_boundary)
{
    resume_equals_straight(CE " --optim sgd --lr 0.1 --momentum 0.9", 10, 23, "");
}

Test(resume, sgd_nesterov_weight_decay_dampening)
{
    resume_equals_straight(CE " --optim sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.01",
                           13, 25, "");
    resume_equals_straight(CE " --optim sgd --lr 0.05 --momentum 0.8 --dampening 0.5", 1, 4, "");
}

Test(resume, adam_inside_an_epoch)
{
    resume_equals_straight(CE " --optim adam --lr 0.01", 7, 23, "");
}

Test(resume, adam_at_an_epoch_boundary)
{
    resume_equals_straight(CE " --optim adam --lr 0.01", 20, 23, "");
}

Test(resume, adamw_with_accumulation)
{
    /* 10 micro-batches of 12 per epoch, 2 per step: 5 steps per epoch */
    resume_equals_straight(CE " --optim adamw --lr 0.01 --accum 2", 3, 12, "");
    resume_equals_straight(CE " --optim adamw --lr 0.01 --accum 2", 5, 12, "");
}

Test(resume, sgd_momentum_with_accumulation_and_a_short_last_batch)
{
    /* 125 samples: 11 micro-batches (the last of 5 rows), 6 steps per epoch, the last short */
    const char *common = "--layers 8,16,3 --loss ce --samples 125 --batch 12 --accum 2 "
                         "--backend cpu --mode single --quiet --log-every 1 --optim sgd --lr 0.1 --momentum 0.9";
    resume_equals_straight(common, 5, 14, "");
    resume_equals_straight(common, 6, 14, "");
}

Test(resume, regression_tanh_drop_last_no_shuffle_every_3)
{
    resume_equals_straight("--layers 6,12,2 --act tanh --loss mse --samples 100 --batch 16 "
                           "--drop-last --no-shuffle --optim adam --lr 0.01 --backend cpu --mode single --quiet "
                           "--log-every 1",
                           8, 15, "--checkpoint-every 3");
}

Test(resume, plain_sgd_has_no_state_and_one_step_left)
{
    resume_equals_straight(CE " --optim sgd --lr 0.1", 22, 23, "");
}

Test(resume, a_chain_of_resumes_equals_one_run)
{
    char ck[512], args[2048], err[ERR_LEN];
    path_in(ck, sizeof ck, "chain.safetensors");
    const char *common = CE " --optim adam --lr 0.01";
    run_result_t a, r;
    snprintf(args, sizeof args, "%s --steps 25", common);
    cr_assert_eq(tu_run(args, &a, err), DDP_OK, "%s", err);
    snprintf(args, sizeof args, "%s --steps 6 --checkpoint %s", common, ck);
    cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
    result_free(&r);
    const long stops[] = {11, 19, 25};
    for (int i = 0; i < 3; i++) {
        /* resume from the file and keep writing it */
        snprintf(args, sizeof args, "%s --steps %ld --resume %s --checkpoint %s --checkpoint-every 4",
                 common, stops[i], ck, ck);
        cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
        if (i < 2)
            result_free(&r);
    }
    cr_assert_eq(r.checksum.bits, a.checksum.bits);
    result_free(&a);
    result_free(&r);
}

Test(resume, warmup_counts_from_the_resumed_step)
{
    char ck[512], args[1024], err[ERR_LEN];
    path_in(ck, sizeof ck, "ck.safetensors");
    run_result_t b, c;
    snprintf(args, sizeof args, CE " --steps 8 --checkpoint %s", ck);
    cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s", err);
    snprintf(args, sizeof args, CE " --steps 20 --warmup-steps 3 --resume %s", ck);
    cr_assert_eq(tu_run(args, &c, err), DDP_OK, "%s", err);
    cr_assert_eq(c.steps, 12);
    cr_assert_eq(c.warmup_steps, 3);
    cr_assert_eq(c.times.n, 9, "12 steps run, 3 of them warm-up");
    cr_assert_eq(c.times.timed_samples, 9 * 12);
    result_free(&b);
    result_free(&c);
}

/* Run the K-step checkpoint with `made`, then try to resume with `resumed`:
 * the strategy must refuse with DDP_ERR_INPUT and a message holding `expect`. */
static void resume_refused(const char *made, const char *resumed, const char *expect)
{
    char ck[512], args[2048], err[ERR_LEN];
    path_in(ck, sizeof ck, "ck.safetensors");
    run_result_t b, c;
    snprintf(args, sizeof args, "%s --checkpoint %s", made, ck);
    cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s", err);
    result_free(&b);
    snprintf(args, sizeof args, "%s --resume %s", resumed, ck);
    int rc = tu_run(args, &c, err);
    cr_expect_eq(rc, DDP_ERR_INPUT, "%s: rc %d", resumed, rc);
    /* DDP: the supervisor names the rank that found it first */
    const char *opt = strstr(err, "--resume ");
    cr_expect(opt == err || (opt && strncmp(err, "rank ", 5) == 0),
              "message does not start with the option: %s", err);
    cr_expect(strstr(err, expect) != NULL, "expected '%s' in: %s", expect, err);
    /* the preflight (main, before any training) says the same */
    config_t cfg;
    cr_assert_eq(tu_parse(&cfg, args, err), DDP_OK);
    model_spec_t spec;
    cr_assert_eq(config_model_spec(&cfg, &spec, err), DDP_OK);
    dataset_t d;
    cr_assert_eq(data_load(&cfg, &spec, &d, err), DDP_OK);
    rc = ckpt_preflight(&cfg, &spec, &d, err);
    cr_expect_eq(rc, DDP_ERR_INPUT);
    cr_expect(strstr(err, expect) != NULL, "preflight: expected '%s' in: %s", expect, err);
    data_free(&d);
}

Test(resume, every_setting_that_must_match_is_checked)
{
    resume_refused(CE " --steps 5", CE " --steps 9 --batch 24",
                   "written with --batch 12, this run has --batch 24");
    resume_refused(CE " --steps 5 --optim sgd", CE " --steps 9 --optim adam",
                   "written with --optim sgd, this run has --optim adam");
    resume_refused(CE " --steps 5 --optim sgd --momentum 0.9", CE " --steps 9 --optim sgd",
                   "written with --momentum 0.9, this run has --momentum 0");
    resume_refused(CE " --steps 5", CE " --steps 9 --beta2 0.99",
                   "written with --beta2 0.999, this run has --beta2 0.99");
    resume_refused(CE " --steps 5 --lr 0.1", CE " --steps 9 --lr 0.2",
                   "written with --lr 0.1, this run has --lr 0.2");
    resume_refused(CE " --steps 5", CE " --steps 9 --seed 3",
                   "written with --seed 0, this run has --seed 3");
    resume_refused(CE " --steps 5", CE " --steps 9 --accum 2",
                   "written with --accum 1, this run has --accum 2");
    resume_refused(CE " --steps 5", CE " --steps 9 --no-shuffle",
                   "written with shuffle true, this run has shuffle false");
    resume_refused(CE " --steps 5", CE " --steps 9 --act tanh", "--act relu");
    /* the optimizer state is fp32 in both, but only the precision the run
     * started with continues it bit for bit */
    resume_refused(CE " --steps 5", CE " --steps 9 --precision bf16",
                   "written with --precision fp32, this run has --precision bf16");
    resume_refused(CE " --steps 5 --precision bf16", CE " --steps 9",
                   "written with --precision bf16, this run has --precision fp32");
    resume_refused(CE " --steps 5", CE " --steps 9 --samples 240",
                   "written with data synthetic classes samples=120, this run has data synthetic "
                   "classes samples=240");
    resume_refused(CE " --steps 5", "--layers 8,32,3 --loss ce --samples 120 --batch 12 "
                   "--backend cpu --mode single --quiet --steps 9",
                   "written with --layers 8,16,3, this run has --layers 8,32,3");
    resume_refused(CE " --steps 5", CE " --steps 5",
                   "the checkpoint is at step 5 and this run ends at step 5: nothing left to run");
}

Test(resume, a_weights_file_is_not_a_checkpoint)
{
    char p[512], args[1024], err[ERR_LEN];
    model_spec_t spec;
    spec_of(&spec, "8,16,3");
    float *params = calloc(spec.nparams, sizeof(float));
    config_t cfg;
    config_defaults(&cfg);
    cr_assert_eq(ckpt_save_weights(path_in(p, sizeof p, "w.safetensors"), &cfg, &spec, params, err),
                 DDP_OK);
    free(params);
    run_result_t r;
    snprintf(args, sizeof args, CE " --steps 3 --resume %s", p);
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "not a ddpbench checkpoint"), "%s", err);
    /* ... while a checkpoint is fine for --init (its optimizer state is skipped) */
    char ck[512];
    path_in(ck, sizeof ck, "ck.safetensors");
    snprintf(args, sizeof args, CE " --steps 3 --optim adam --checkpoint %s", ck);
    cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
    float *w = malloc(spec.nparams * sizeof(float));
    cr_assert_eq(ckpt_load_weights(ck, "--init", &spec, w, err), DDP_OK, "%s", err);
    cr_assert(memcmp(w, r.params, spec.nparams * sizeof(float)) == 0);
    free(w);
    result_free(&r);
}

Test(resume, preflight_refuses_bad_combinations_and_paths)
{
    char args[1024], err[ERR_LEN], p[512];
    config_t cfg;
    model_spec_t spec;
    dataset_t d;
    struct {
        const char *args;
        const char *expect;
    } cases[] = {
        {CE " --init %s/a --resume %s/b", "--init and --resume: choose one"},
        {CE " --mode compare --backend cpu --save %s/w%s", "--save: not with --mode compare"},
        {CE " --mode compare --backend cpu --gpus 0,1 --checkpoint %s/c%s",
         "--checkpoint: not with --mode compare"},
        {CE " --save %s/nodir/w.safetensors%s", "cannot create a file in directory"},
        {CE " --checkpoint %s%s", "is a directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].args, tmp_dir, i == 0 ? tmp_dir : "");
        cr_assert_eq(tu_parse(&cfg, args, err), DDP_OK, "%s: %s", args, err);
        cr_assert_eq(config_model_spec(&cfg, &spec, err), DDP_OK);
        cr_assert_eq(data_load(&cfg, &spec, &d, err), DDP_OK);
        int rc = ckpt_preflight(&cfg, &spec, &d, err);
        cr_expect_eq(rc, DDP_ERR_INPUT, "%s: rc %d", args, rc);
        cr_expect(strstr(err, cases[i].expect) != NULL, "expected '%s' in: %s", cases[i].expect,
                  err);
        data_free(&d);
    }
    /* a good setup passes, in every mode that trains one model */
    const char *modes[] = {"", " --mode dp --gpus 0,1", " --mode ddp --gpus 0,1,2"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        snprintf(args, sizeof args, CE " --save %s --checkpoint %s/c%s",
                 path_in(p, sizeof p, "w"), tmp_dir, modes[i]);
        cr_assert_eq(tu_parse(&cfg, args, err), DDP_OK, "%s: %s", args, err);
        cr_assert_eq(config_model_spec(&cfg, &spec, err), DDP_OK);
        cr_assert_eq(data_load(&cfg, &spec, &d, err), DDP_OK);
        cr_assert_eq(ckpt_preflight(&cfg, &spec, &d, err), DDP_OK, "%s: %s", args, err);
        data_free(&d);
    }
}

// ----------------------------------------------------------------------------
// resume in DP and DDP: the same bit-exact continuation.  DP writes from
// device 0, DDP from rank 0, and every DDP rank reads the file back.  These
// hold because each step is itself deterministic: DP sums the gradients onto
// device 0 in slot order however the arena is sliced, and the shared-memory
// all-reduce adds the ranks' inputs in rank order.

/* CE without its mode; 10 steps per epoch. */
#define CE_ANY "--layers 8,16,3 --loss ce --samples 120 --batch 12 --backend cpu --quiet --log-every 1"
/* 125 samples, accum 2: 11 micro-batches (the last short), 6 steps per epoch */
#define CE_SHORT "--layers 8,16,3 --loss ce --samples 125 --batch 12 --accum 2 --backend cpu " \
                 "--quiet --log-every 1"

Test(resume, dp_two_devices_sgd_momentum_and_adam)
{
    resume_equals_straight(CE_ANY " --mode dp --gpus 0,1 --optim sgd --lr 0.1 --momentum 0.9", 7,
                           23, "");
    resume_equals_straight(CE_ANY " --mode dp --gpus 0,1 --optim adam --lr 0.01", 13, 23,
                           "--checkpoint-every 4");
}

Test(resume, dp_two_devices_with_accumulation)
{
    resume_equals_straight(CE_ANY " --mode dp --gpus 0,1 --optim adam --lr 0.01 --accum 2", 3, 12,
                           "");
    resume_equals_straight(CE_SHORT " --mode dp --gpus 0,1 --optim sgd --lr 0.1 --momentum 0.9",
                           5, 14, "");
}

Test(resume, dp_three_devices_uneven_chunks)
{
    /* batch 12 over 3 devices; the short micro-batch of 5 rows gives chunks 2,2,1 */
    resume_equals_straight(CE_ANY " --mode dp --gpus 0,1,2 --optim adam --lr 0.01", 7, 23, "");
    resume_equals_straight(CE_SHORT " --mode dp --gpus 0,1,2 --optim sgd --lr 0.1 --momentum 0.9",
                           6, 14, "");
    resume_equals_straight(CE_SHORT " --mode dp --gpus 0,1,2 --optim adamw --lr 0.01", 5, 14, "");
}

Test(resume, ddp_two_ranks_sgd_momentum_and_adam)
{
    resume_equals_straight(CE_ANY " --mode ddp --gpus 0,1 --optim sgd --lr 0.1 --momentum 0.9",
                           7, 23, "");
    resume_equals_straight(CE_ANY " --mode ddp --gpus 0,1 --optim adam --lr 0.01", 10, 23,
                           "--checkpoint-every 3");
}

Test(resume, ddp_two_ranks_with_accumulation)
{
    resume_equals_straight(CE_ANY " --mode ddp --gpus 0,1 --optim adam --lr 0.01 --accum 2", 3,
                           12, "");
    resume_equals_straight(CE_SHORT " --mode ddp --gpus 0,1 --optim sgd --lr 0.1 --momentum 0.9",
                           5, 14, "");
}

Test(resume, ddp_three_ranks)
{
    resume_equals_straight(CE_ANY " --mode ddp --gpus 0,1,2 --optim adam --lr 0.01", 7, 23, "");
    resume_equals_straight(CE_SHORT " --mode ddp --gpus 0,1,2 --optim sgd --lr 0.1 --momentum 0.9",
                           6, 14, "");
    resume_equals_straight(CE_ANY " --mode ddp --gpus 0,1,2 --optim sgd --lr 0.1 --momentum 0.9 "
                           "--accum 2", 4, 12, "");
}

Test(resume, ddp_chain_with_small_buckets_equals_one_run)
{
    /* several buckets (so several all-reduces per step), resumed twice */
    char ck[512], args[2048], err[ERR_LEN];
    path_in(ck, sizeof ck, "chain.safetensors");
    const char *common = "--layers 8,64,64,3 --loss ce --samples 120 --batch 12 --backend cpu "
                         "--quiet --mode ddp --gpus 0,1 --optim adam --lr 0.01 --bucket-mb 0.01 "
                         "--first-bucket-mb 0.005";
    run_result_t a, r;
    snprintf(args, sizeof args, "%s --steps 17", common);
    cr_assert_eq(tu_run(args, &a, err), DDP_OK, "%s", err);
    snprintf(args, sizeof args, "%s --steps 5 --checkpoint %s", common, ck);
    cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
    result_free(&r);
    const long stops[] = {11, 17};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s --steps %ld --resume %s --checkpoint %s", common,
                 stops[i], ck, ck);
        cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
        if (i < 1)
            result_free(&r);
    }
    cr_assert(memcmp(r.params, a.params, a.nparams * sizeof(float)) == 0,
              "max rel %.3g", max_rel_diff(r.params, a.params, a.nparams, 1e-3));
    result_free(&a);
    result_free(&r);
}

Test(resume, the_device_count_and_mode_must_match)
{
    resume_refused(CE_ANY " --steps 5 --mode dp --gpus 0,1", CE_ANY " --steps 9 --mode dp --gpus 0,1,2",
                   "written with device count 2, this run has device count 3");
    resume_refused(CE_ANY " --steps 5 --mode ddp --gpus 0,1", CE_ANY " --steps 9 --mode ddp --gpus 0,1,2",
                   "written with device count 2, this run has device count 3");
    resume_refused(CE_ANY " --steps 5 --mode dp --gpus 0,1", CE_ANY " --steps 9 --mode ddp --gpus 0,1",
                   "written with --mode dp, this run has --mode ddp");
}

// ----------------------------------------------------------------------------
// what an output may replace, and whose temporaries a write may remove

Test(st, only_a_regular_file_is_replaced)
{
    char p[512], link[512], err[ERR_LEN];
    float v = 1;
    st_out_t t = {"x", 1, {1}, &v};
    spit(path_in(p, sizeof p, "target"), "keep", 4);
    cr_assert_eq(symlink(p, path_in(link, sizeof link, "link.st")), 0);
    cr_assert_eq(afile_check(link, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "is a symbolic link"), "%s", err);
    cr_assert_eq(st_write(link, &t, 1, NULL, 0, false, err), DDP_ERR_INPUT);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
    size_t n;
    uint8_t *b = slurp(p, &n);
    cr_assert(n == 4 && memcmp(b, "keep", 4) == 0, "the link's target changed");
    free(b);
    cr_assert_eq(mkfifo(path_in(p, sizeof p, "fifo.st"), 0600), 0);
    cr_assert_eq(afile_check(p, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "is a FIFO, not a regular file"), "%s", err);
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_ERR_INPUT);
    cr_assert_eq(lstat(p, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    cr_assert_eq(count_temps("fifo.st"), 0);
}

Test(st, a_locked_temporary_is_alive_whatever_its_pid_says)
{
    char p[512], live[512], dead[512], young[512], err[ERR_LEN];
    path_in(p, sizeof p, "w.st");
    /* PIDs no process of this namespace has: as a writer in another
     * container would leave them */
    path_in(live, sizeof live, ".w.st.tmp.999999998.BBBBBB");
    path_in(dead, sizeof dead, ".w.st.tmp.999999999.AAAAAA");
    path_in(young, sizeof young, ".w.st.new.999999997.CCCCCC");
    spit(dead, "", 0);
    spit(young, "", 0);
    spit(live, "", 0);
    /* the live writer's lock, on its own open file (flock is per open file) */
    int fd = open(live, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(flock(fd, LOCK_EX), 0);
    float v = 1;
    st_out_t t = {"x", 1, {1}, &v};
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
    cr_assert_eq(access(dead, F_OK), -1, "the dead writer's temporary survived");
    cr_assert_eq(access(live, F_OK), 0, "the live writer's temporary was removed");
    cr_assert_eq(access(young, F_OK), 0, "a minute-young .new. file may be a writer in its first instant");
    close(fd);
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
    cr_assert_eq(access(live, F_OK), -1, "once its lock is gone, so is the temporary");
}

/* The cleaner takes only names of the writer's own pattern: a user's files
 * that merely start like a temporary survive, unlocked and old as they are. */
Test(st, the_cleaner_touches_only_its_own_pattern)
{
    static const char *mine[] = {".w.st.tmp.12345.AbC9zZ", ".w.st.new.7.q1w2e3"};
    static const char *users[] = {".w.st.tmp.notes", ".w.st.new.bak", ".w.st.tmp.12.ABCDEF.bak",
                                  ".w.st.tmp.12.ABCDE", ".w.st.tmp.x12.ABCDEF",
                                  ".w.st.tmp.012.ABCDEF", ".w.st.tmp.12.ABC-EF",
                                  ".w.st.tmpx.12.ABCDEF", ".w.st.tmp.12345678901.ABCDEF",
                                  ".w.stx.tmp.12.ABCDEF"};
    char p[512], q[512], err[ERR_LEN];
    path_in(p, sizeof p, "w.st");
    struct timespec old[2] = {{time(NULL) - 120, 0}, {time(NULL) - 120, 0}};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++) {
        spit(path_in(q, sizeof q, mine[i]), "", 0);
        cr_assert_eq(utimensat(AT_FDCWD, q, old, 0), 0);
    }
    for (size_t i = 0; i < sizeof users / sizeof *users; i++) {
        spit(path_in(q, sizeof q, users[i]), "notes", 5);
        cr_assert_eq(utimensat(AT_FDCWD, q, old, 0), 0);
    }
    float v = 1;
    st_out_t t = {"x", 1, {1}, &v};
    cr_assert_eq(st_write(p, &t, 1, NULL, 0, false, err), DDP_OK, "%s", err);
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++)
        cr_assert_eq(access(path_in(q, sizeof q, mine[i]), F_OK), -1,
                     "the dead writer's %s survived", mine[i]);
    for (size_t i = 0; i < sizeof users / sizeof *users; i++)
        cr_assert_eq(access(path_in(q, sizeof q, users[i]), F_OK), 0,
                     "the user's file %s was removed", users[i]);
}

/* A set of files committed as one: a failure at any file, before or after
 * others were renamed into place, leaves every old file as it was (and no
 * new file where there was none), and no temporary. */
static void set_attempt(int fail_at, bool fail_in_write)
{
    static const char *names[3] = {"a.bin", "b.bin", "c.bin"};
    char p[3][512], err[ERR_LEN] = "";
    afile_t f[3];
    for (int i = 0; i < 3; i++)
        path_in(p[i], sizeof p[i], names[i]);
    spit(p[0], "old a", 5); /* b.bin does not exist; c.bin is old */
    spit(p[2], "old c", 5);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(afile_open(&f[i], p[i], err), DDP_OK, "%s", err);
        afile_write(&f[i], "new", 3);
    }
    if (fail_in_write) { /* a write that failed (disk full) */
        f[fail_at].failed = true;
        f[fail_at].write_errno = ENOSPC;
    } else { /* a directory appears where the file goes, after a and b are renamed */
        unlink(p[fail_at]);
        cr_assert_eq(mkdir(p[fail_at], 0755), 0);
    }
    cr_assert_neq(afile_commit_set(f, 3, err), DDP_OK);
    cr_assert_not_null(strstr(err, names[fail_at]), "the file at fault is not named: %s", err);
    size_t n;
    uint8_t *b = slurp(p[0], &n);
    cr_assert(n == 5 && memcmp(b, "old a", 5) == 0, "a.bin is not the old file");
    free(b);
    cr_assert_eq(access(p[1], F_OK), -1, "b.bin, new in the failed set, was left");
    if (fail_in_write) {
        b = slurp(p[2], &n);
        cr_assert(n == 5 && memcmp(b, "old c", 5) == 0, "c.bin is not the old file");
        free(b);
    } else {
        rmdir(p[2]);
    }
    for (int i = 0; i < 3; i++)
        cr_assert_eq(count_temps(names[i]), 0, "a temporary of %s was left", names[i]);
}

Test(st, a_set_of_files_is_the_old_set_or_the_whole_new_one)
{
    set_attempt(2, false); /* at the last rename: a and b were already in place */
    set_attempt(1, true);  /* at a write: nothing was renamed yet */
    char p[3][512], err[ERR_LEN];
    afile_t f[3];
    static const char *names[3] = {"a.bin", "b.bin", "c.bin"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(afile_open(&f[i], path_in(p[i], sizeof p[i], names[i]), err), DDP_OK);
        afile_write(&f[i], "new", 3);
    }
    cr_assert_eq(afile_commit_set(f, 3, err), DDP_OK, "%s", err);
    for (int i = 0; i < 3; i++) {
        size_t n;
        uint8_t *b = slurp(p[i], &n);
        cr_assert(n == 3 && memcmp(b, "new", 3) == 0, "%s is not the new file", names[i]);
        free(b);
        cr_assert_eq(count_temps(names[i]), 0);
    }
}

// ----------------------------------------------------------------------------
// non-finite data and edited checkpoints

/* Overwrite the float at byte offset `at` of the data region of path. */
static void poke_float(const char *path, size_t at_float, float v)
{
    size_t n;
    uint8_t *b = slurp(path, &n);
    uint64_t hl;
    memcpy(&hl, b, 8);
    cr_assert_leq(8 + hl + 4 * at_float + 4, n);
    memcpy(b + 8 + hl + 4 * at_float, &v, 4);
    spit(path, b, n);
    free(b);
}

/* Replace the first `from` in path's header with `to` (the same length). */
static void poke_text(const char *path, const char *from, const char *to)
{
    size_t n;
    uint8_t *b = slurp(path, &n);
    uint8_t *at = memmem(b, n, from, strlen(from));
    cr_assert_not_null(at, "'%s' is not in %s", from, path);
    memcpy(at, to, strlen(to));
    spit(path, b, n);
    free(b);
}

Test(weights, non_finite_or_mislabelled_files_are_refused)
{
    char p[512], args[1024], err[ERR_LEN];
    model_spec_t spec;
    spec_of(&spec, "6,5,3");
    float *params = calloc(spec.nparams, sizeof(float));
    config_t cfg;
    config_defaults(&cfg);
    cr_assert_eq(ckpt_save_weights(path_in(p, sizeof p, "w.st"), &cfg, &spec, params, err), DDP_OK);
    free(params);
    poke_float(p, 7, INFINITY); /* 0.weight [1, 1] */
    run_result_t r;
    snprintf(args, sizeof args,
             "--layers 6,5,3 --loss ce --samples 30 --batch 6 --steps 2 --backend cpu --mode "
             "single --quiet --init %s",
             p);
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "0.weight [1, 1] is inf: the file holds values that are not finite"),
              "%s", err);
    poke_float(p, 7, 0.0f);
    poke_text(p, "\"layers\":\"6,5,3\"", "\"layers\":\"6,5,4\"");
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "its __metadata__ says layers '6,5,4', but its tensors are those of 6,5,3"),
              "%s", err);
}

Test(resume, an_edited_or_corrupted_checkpoint_is_refused)
{
    char ck[512], bad[512], args[1024], err[ERR_LEN];
    path_in(ck, sizeof ck, "ck.st");
    run_result_t r;
    snprintf(args, sizeof args, CE " --optim adam --steps 4 --checkpoint %s", ck);
    cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
    result_free(&r);
    size_t n;
    uint8_t *orig = slurp(ck, &n);
    path_in(bad, sizeof bad, "bad.st");
    snprintf(args, sizeof args, CE " --optim adam --steps 8 --resume %s", bad);
    /* the position, as someone would edit it by hand */
    spit(bad, orig, n);
    poke_text(bad, "\"optim_step\":\"4\"", "\"optim_step\":\"3\"");
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "do not match its checksum"), "%s", err);
    /* one bit of the data */
    spit(bad, orig, n);
    orig[n - 9] ^= 1;
    spit(bad, orig, n);
    orig[n - 9] ^= 1;
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "do not match its checksum"), "%s", err);
    /* a NaN in the optimizer state is named before the checksum */
    spit(bad, orig, n);
    uint64_t hl;
    memcpy(&hl, orig, 8);
    poke_float(bad, (n - 8 - hl) / 4 - 1, NAN);
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "optim.exp_avg_sq.2.bias [2] is nan"), "%s", err);
    /* and the file as written still resumes */
    spit(bad, orig, n);
    cr_assert_eq(tu_run(args, &r, err), DDP_OK, "%s", err);
    result_free(&r);
    free(orig);
}

Test(resume, a_diverged_run_does_not_overwrite_its_checkpoint)
{
    char ck[512], args[1024], err[ERR_LEN];
    path_in(ck, sizeof ck, "ck.st");
    run_result_t r;
    /* a checkpoint every step; SGD at lr 1e6 turns the parameters to NaN
     * within a few steps, before the epoch's loss line would */
    snprintf(args, sizeof args,
             CE " --optim sgd --lr 1e6 --steps 9 --checkpoint %s --checkpoint-every 1", ck);
    const char *ce = strstr(args, "--log-every 1"); /* no loss line before the divergence */
    memcpy((char *)ce, "--log-every 9", 13);
    cr_assert_eq(tu_run(args, &r, err), DDP_ERR_RUNTIME, "%s", err);
    cr_assert(strstr(err, "the training diverged; --checkpoint"), "%s", err);
    cr_assert(strstr(err, "was not written"), "%s", err);
    /* what is there is the last finite state, and it loads */
    model_spec_t spec;
    spec_of(&spec, "8,16,3");
    float *w = malloc(spec.nparams * sizeof(float));
    cr_assert_eq(ckpt_load_weights(ck, "--init", &spec, w, err), DDP_OK, "%s", err);
    free(w);
}

Test(st, the_content_hash_does_not_depend_on_how_bytes_are_split)
{
    uint8_t b[1000];
    for (int i = 0; i < 1000; i++)
        b[i] = (uint8_t)(i * 7);
    hash64_t a;
    hash64_init(&a);
    hash64_update(&a, b, sizeof b);
    uint64_t want = hash64_final(&a);
    for (int s1 = 0; s1 <= 1000; s1 += 7)
        for (int s2 = s1; s2 <= 1000; s2 += 13) {
            hash64_t h;
            hash64_init(&h);
            hash64_update(&h, b, (size_t)s1);
            hash64_update(&h, b + s1, (size_t)(s2 - s1));
            hash64_update(&h, b + s2, (size_t)(1000 - s2));
            cr_assert_eq(hash64_final(&h), want, "split at %d and %d", s1, s2);
        }
    hash64_init(&a);
    hash64_update(&a, b, 999);
    cr_assert_neq(hash64_final(&a), want, "a prefix hashes apart (the length counts)");
}

/* Every option row that records a fact (config/fields.h: CKPT) is checked
 * on --resume: flipping it alone is refused, naming the option. */
Test(resume, every_recorded_option_is_checked_on_resume)
{
    static const char *const made[] = {CE " --optim sgd --momentum 0.5", CE " --optim adam"};
    int checked = 0;
    for (int m = 0; m < 2; m++) {
        char ck[512], args[2048], err[ERR_LEN];
        path_in(ck, sizeof ck, "ck.safetensors");
        run_result_t b;
        snprintf(args, sizeof args, "%s --steps 3 --checkpoint %s", made[m], ck);
        cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s", err);
        result_free(&b);
        snprintf(args, sizeof args, "%s --steps 9 --resume %s", made[m], ck);
        config_t base;
        cr_assert_eq(tu_parse(&base, args, err), DDP_OK, "%s", err);
        for (int i = 0; i < config_fields(); i++) {
            const config_derive_t *r = config_field_derive(i);
            const char *n = config_field_name(i);
            if (r->ckpt != C_FACT || (r->optims && !(r->optims & (1u << base.optim.kind))))
                continue;
            config_t c = base;
            cr_assert_eq(tu_field_flip(&c, i, err), DDP_OK, "%s", err);
            model_spec_t spec;
            cr_assert_eq(config_model_spec(&c, &spec, err), DDP_OK, "--%s: %s", n, err);
            dataset_t d;
            cr_assert_eq(data_load(&c, &spec, &d, err), DDP_OK, "--%s: %s", n, err);
            int rc = ckpt_preflight(&c, &spec, &d, err);
            data_free(&d);
            char no[64], want[64]; /* a flag with a --no- form is named by its field */
            snprintf(no, sizeof no, "no-%s", n);
            snprintf(want, sizeof want, "written with %s%s ",
                     config_field_find(no) >= 0 ? "" : "--", n);
            cr_expect_eq(rc, DDP_ERR_INPUT, "--%s flipped: rc %d", n, rc);
            cr_expect(strstr(err, want), "--%s flipped: expected '%s' in: %s", n, want, err);
            checked++;
        }
    }
    cr_expect_gt(checked, 20, "only %d facts checked", checked);
}
