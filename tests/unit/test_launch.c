/* tests/unit/test_launch.c: what the mpirun launcher decides without MPI
 * itself: how a rank resolves its device and collectives from mpirun's world
 * (config_resolve), and the start-up check's fingerprint, which must name
 * the one thing two ranks were started with differently.  The launcher with
 * real ranks runs in tests/e2e/e2e_mpi.sh. */
#include "common/config/fields.h"
#include "ddp/fingerprint.h"
#include "testutil.h"
#include "tu_flip.h"

/* Parse args, then resolve them as rank `rank` of `world` started by mpirun,
 * `local` on its host. */
static int parse_as_rank(config_t *c, const char *args, int world, int rank, int local, char *err)
{
    int rc = tu_parse_args(c, args, err);
    if (rc != DDP_OK)
        return rc;
    c->launcher = LAUNCHER_MPI;
    c->world_size = world;
    c->world_rank = rank;
    c->local_rank = local;
    char note[ERR_LEN];
    return config_resolve(c, note, sizeof note, err);
}

Test(launch, a_rank_takes_its_device_from_its_local_rank)
{
    config_t c;
    char err[ERR_LEN] = "";
    /* rank 2 of 4, the second on its host: --gpus[1] */
    cr_assert_eq(parse_as_rank(&c, "--mode ddp --backend cpu --gpus 3,5", 4, 2, 1, err), DDP_OK,
                 "%s", err);
    cr_assert_eq(c.ngpus, 4, "one device per rank of the world");
    cr_assert_eq(c.gpus[2], 5);
    cr_assert_eq(c.gpus[0], -1, "the others' come from the start-up check");
    cr_assert_eq(c.comm, COMM_MPI, "auto on the CPU under mpirun is mpi");
    cr_assert_eq(c.sampler_replicas, 4, "the sampler has one replica per rank of the world");
    /* --gpus auto on the CPU: a worker per local rank, however many cores */
    cr_assert_eq(parse_as_rank(&c, "--mode ddp --backend cpu", 64, 63, 63, err), DDP_OK, "%s", err);
    cr_assert_eq(c.gpus[63], 63);
    cr_assert_eq(c.ngpus, 64);
    /* the global batch of --batch-per-device counts every rank of the world */
    cr_assert_eq(parse_as_rank(&c, "--mode ddp --backend cpu --batch-per-device 8", 3, 0, 0, err),
                 DDP_OK, "%s", err);
    cr_assert_eq(c.batch, 24);
}

static void bad_rank(const char *args, int world, int rank, int local, const char *want)
{
    config_t c;
    char err[ERR_LEN] = "";
    int rc = parse_as_rank(&c, args, world, rank, local, err);
    cr_assert_eq(rc, DDP_ERR_INPUT, "'%s' as rank %d of %d was accepted", args, rank, world);
    cr_assert(strstr(err, want), "'%s': '%s' lacks '%s'", args, err, want);
    cr_assert_null(strchr(err, '\n'));
}

Test(launch, what_mpirun_cannot_run_is_refused_by_name)
{
    bad_rank("--mode ddp --backend cpu --gpus 0,1", 3, 2, 2,
             "--gpus: local rank 2 on this host has no device: the list names 2");
    bad_rank("--mode ddp --backend cpu --comm shm", 2, 0, 0,
             "--comm shm: ranks started by mpirun share no memory segment");
    bad_rank("--mode dp --backend cpu", 2, 1, 1, "--mode dp: runs in one process");
    bad_rank("--mode single --backend cpu", 2, 0, 0, "--mode single: runs in one process");
    bad_rank("--mode ddp --backend cpu", 65, 0, 0, "mpirun started 65 ranks: ddpbench runs 1..64");
    /* and outside mpirun, --comm mpi has no ranks to talk to */
    config_t c;
    char err[ERR_LEN] = "";
    cr_assert_eq(tu_parse(&c, "--mode ddp --backend cpu --gpus 0,1 --comm mpi", err),
                 DDP_ERR_INPUT);
    cr_assert(strstr(err, "--comm mpi: needs ranks started by mpirun"), "%s", err);
    cr_assert_eq(tu_parse(&c, "--mode ddp --backend cpu --gpus 0,1 --comm auto", err), DDP_OK,
                 "%s", err);
    cr_assert_eq(c.comm, COMM_AUTO, "fork mode keeps auto (shm on the CPU)");
}

// ---------------------------------------------------------------------------
// the fingerprint

static void fp_of(fingerprint_t *fp, const char *args, const dataset_t *d)
{
    config_t c;
    char err[ERR_LEN] = "";
    cr_assert_eq(parse_as_rank(&c, args, 2, 0, 0, err), DDP_OK, "%s", err);
    fingerprint_make(fp, &c, d);
}

Test(launch, the_fingerprint_names_what_differs)
{
    float x[6] = {1, 2, 3, 4, 5, 6}, y[3] = {0, 1, 0};
    dataset_t d = {.n = 3, .in_dim = 2, .tgt_cols = 1, .x = x, .y = y};
    const char *base = "--mode ddp --backend cpu --layers 2,4,2 --loss ce --lr 0.1";
    fingerprint_t a, b;
    char key[64], va[200], vb[200];
    fp_of(&a, base, &d);
    fp_of(&b, base, &d);
    cr_assert_not(fingerprint_diff(&a, &b, key, va, vb, sizeof va), "the same run: %s", key);
    cr_assert(strstr(a.text, "binary hash "), "the binary is in it: %s", a.text);

    /* an option: named as the user writes it, values as typed */
    fp_of(&b, "--mode ddp --backend cpu --layers 2,4,2 --loss ce --lr 0.2", &d);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "--lr");
    cr_assert_str_eq(va, "0.1");
    cr_assert_str_eq(vb, "0.2");
    fp_of(&b, "--mode ddp --backend cpu --layers 2,4,2 --loss ce --lr 0.1 --no-overlap", &d);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "--overlap");

    /* one value of the data: the rows, shape and a hash of every value */
    float x2[6] = {1, 2, 3, 4, 5, 6.5f};
    dataset_t d2 = d;
    d2.x = x2;
    fp_of(&b, base, &d2);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "data");
    cr_assert(strstr(va, "3 rows of 2 features and 1 targets"), "%s", va);
    fp_of(&b, base, NULL);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "data");

    /* another layout of lines is another build */
    memmove(b.text, strchr(b.text, '\n') + 1, strlen(strchr(b.text, '\n') + 1) + 1);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "binary");
    /* and a binary of other bytes */
    fp_of(&b, base, &d);
    char *h = strstr(b.text, "binary hash ");
    h[strlen("binary hash ")] ^= 1;
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "binary");
}

/* Every option a rank must share (config/fields.h: CF_ARITH or CF_SHARED)
 * is in the fingerprint: flipping it alone changes its line, named as the
 * option and put in its row's group. */
Test(launch, every_option_the_ranks_share_changes_the_fingerprint)
{
    float x[6] = {1, 2, 3, 4, 5, 6}, y[3] = {0, 1, 0};
    dataset_t d = {.n = 3, .in_dim = 2, .tgt_cols = 1, .x = x, .y = y};
    config_t base;
    char err[ERR_LEN] = "", key[64], va[200], vb[200];
    cr_assert_eq(parse_as_rank(&base, "--mode ddp --backend cpu --layers 2,4,2 --loss ce", 2, 0,
                               0, err),
                 DDP_OK, "%s", err);
    static fingerprint_t a, b;
    fingerprint_make(&a, &base, &d);
    int checked = 0;
    for (int i = 0; i < config_fields(); i++) {
        const config_derive_t *r = config_field_derive(i);
        const char *n = config_field_name(i);
        if (r->fp == FP_NONE || r->fpv == FPV_RANK0)
            continue;
        if (r->fpv == FPV_DERIVED && r->fp == FP_DATA)
            continue; /* the data line follows the data as loaded (above) */
        config_t c = base;
        cr_assert_eq(tu_field_flip(&c, i, err), DDP_OK, "%s", err);
        fingerprint_make(&b, &c, &d);
        bool differs = fingerprint_diff(&a, &b, key, va, vb, sizeof va);
        cr_expect(differs, "--%s changed and the fingerprint did not", n);
        if (!differs)
            continue;
        char want[64];
        snprintf(want, sizeof want, "--%s", n);
        cr_expect_str_eq(key, r->fpv == FPV_DERIVED ? "world" : want, "flipping --%s", n);
        cr_expect_str_eq(fingerprint_group(key), fingerprint_group(want), "--%s's group", n);
        checked++;
    }
    cr_expect_gt(checked, 40, "only %d options checked", checked);
}
