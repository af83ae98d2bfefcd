/* tests/unit/test_staging.c: batch staging (stager_t in train/stage.c) on a
 * device that is not host-visible.
 *
 * A CPU backend with host_visible cleared takes the same path as a GPU
 * (pinned buffers, copies on the copy stream, two device slots), so this
 * runs everywhere: every staged batch must land in the slot the stager
 * returns, exactly; consecutive batches must use the two slots in turn and
 * the pinned buffers round a ring of 2 per micro-batch (capped); a
 * host-visible device stages straight into the caller's buffers.  The
 * ordering itself (events, the copy stream) is proven on the asynchronous
 * emulated GPU (tests/cuda_emu/run.sh), where a missing wait shows. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/device/backend_impl.h" /* a fake device: host memory taking the GPU path */
#include "common/data/data.h"
#include "common/nn/model.h"
#include "common/measure/step_meter.h"
#include "common/train/stage.h"

typedef struct {
    backend_t *be;
    dataset_t data;
    model_spec_t spec;
    replica_t rep;
    stager_t stg;
    step_meter_t meter;
    device_stats_t st;
} fixture_t;

static void fixture_open(fixture_t *f, int max_rows, int accum, int samples, int in_dim)
{
    char err[ERR_LEN];
    memset(f, 0, sizeof *f);
    cr_assert_eq(backend_cpu_create(&f->be, 0, 1, err), DDP_OK, "%s", err);
    f->be->host_visible = false; /* take the GPU's path: staging buffers and copies */
    int dims[] = {in_dim, 4, 3};
    cr_assert_eq(model_spec_init(&f->spec, dims, 3, ACT_RELU, err), DDP_OK, "%s", err);
    cr_assert_eq(data_synthetic(&f->data, SYNTH_REGRESSION, samples, in_dim, 3, 1, 0.1f, err),
                 DDP_OK, "%s", err);
    cr_assert_eq(replica_init(&f->rep, f->be, &f->spec, max_rows, 3, err), DDP_OK, "%s", err);
    cr_assert_eq(stager_init(&f->stg, f->be, f->rep.x, f->rep.y, max_rows, accum, &f->data, err),
                 DDP_OK, "%s", err);
    cr_assert(stager_active(&f->stg));
    cr_assert_eq(step_meter_init(&f->meter, &(step_meter_sinks_t){.dev = &f->st}, err), DDP_OK);
    step_meter_begin(&f->meter, 0, true, false);
}

static void fixture_close(fixture_t *f)
{
    step_meter_free(&f->meter);
    stager_free(&f->stg);
    replica_free(&f->rep);
    data_free(&f->data);
    backend_destroy(f->be);
}

/* x and y hold exactly rows idx of the dataset. */
static void assert_batch(const fixture_t *f, const float *x, const float *y, const uint32_t *idx,
                         int rows, const char *what)
{
    int in = f->data.in_dim;
    for (int r = 0; r < rows; r++) {
        cr_assert_arr_eq(x + (size_t)r * in, f->data.x + (size_t)idx[r] * in, in * sizeof(float),
                         "%s: x row %d", what, r);
        cr_assert_arr_eq(y + (size_t)r * 3, f->data.y + (size_t)idx[r] * 3, 3 * sizeof(float),
                         "%s: y row %d", what, r);
    }
}

Test(staging, batches_land_exactly_in_alternating_slots)
{
    fixture_t f;
    fixture_open(&f, 8, 1, 100, 6);
    cr_assert_eq(f.stg.nhost, 2, "two pinned buffers per micro-batch of a step");
    uint32_t idx[6][8];
    int rows[6];
    float *xs[6], *ys[6];
    for (int b = 0; b < 6; b++) {
        rows[b] = b == 0 || b % 2 ? 8 : 5; /* some short batches, as at an epoch's end */
        for (int r = 0; r < 8; r++)
            idx[b][r] = (uint32_t)((b * 13 + r * 7) % 100);
    }
    for (int b = 0; b < 6; b++) {
        cr_assert_eq(stager_stage(&f.stg, &f.data, idx[b], rows[b], &f.meter, &xs[b], &ys[b]),
                     DDP_OK, "%s", backend_last_error(f.be));
        assert_batch(&f, xs[b], ys[b], idx[b], rows[b], "just staged");
        if (b > 0) {
            cr_assert_neq(xs[b], xs[b - 1], "batch %d overwrote the slot batch %d reads", b, b - 1);
            cr_assert_neq(ys[b], ys[b - 1]);
            /* the previous batch is still intact in its slot */
            assert_batch(&f, xs[b - 1], ys[b - 1], idx[b - 1], rows[b - 1], "the previous batch");
        }
        if (b > 1)
            cr_assert_eq(xs[b], xs[b - 2], "two slots, used in turn");
    }
    cr_assert(xs[0] == f.rep.x || xs[1] == f.rep.x, "the replica's own buffers are one slot");
    cr_assert_eq(f.stg.n, 6);
    cr_assert_eq(f.meter.rec[f.meter.cur].n, 1 + 2 * 6, "a data and an h2d lap per stage");
    fixture_close(&f);
}

Test(staging, the_pinned_ring_follows_accum_within_its_caps)
{
    fixture_t f;
    fixture_open(&f, 4, 3, 50, 6);
    cr_assert_eq(f.stg.nhost, 6, "accum 3: six buffers");
    fixture_close(&f);
    fixture_open(&f, 4, 16, 50, 6);
    cr_assert_eq(f.stg.nhost, STAGE_MAX_HOST, "capped at %d buffers", STAGE_MAX_HOST);
    fixture_close(&f);
    /* 512 rows of 40000 floats: 80 MB a buffer, so 256 MB allows 3 */
    fixture_open(&f, 512, 4, 20, 40000 - 3);
    cr_assert_eq(f.stg.nhost, 3, "the pinned bytes are capped: %d buffers", f.stg.nhost);
    uint32_t idx[2] = {3, 7};
    float *x, *y;
    for (int b = 0; b < 7; b++) { /* more stages than buffers: the ring wraps */
        cr_assert_eq(stager_stage(&f.stg, &f.data, idx, 2, &f.meter, &x, &y), DDP_OK);
        assert_batch(&f, x, y, idx, 2, "a wrapped ring");
    }
    fixture_close(&f);
}

Test(staging, host_visible_devices_stage_directly)
{
    backend_t *be;
    char err[ERR_LEN];
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    dataset_t d;
    cr_assert_eq(data_synthetic(&d, SYNTH_REGRESSION, 10, 6, 3, 1, 0.1f, err), DDP_OK);
    float x0[4 * 6], y0[4 * 3];
    stager_t s;
    cr_assert_eq(stager_init(&s, be, x0, y0, 4, 2, &d, err), DDP_OK);
    cr_assert(!stager_active(&s), "no staging buffers on a host-visible device");
    step_meter_t m;
    device_stats_t st = {0};
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.dev = &st}, err), DDP_OK);
    step_meter_begin(&m, 0, true, false);
    uint32_t idx[3] = {9, 0, 4};
    float *x, *y;
    cr_assert_eq(stager_stage(&s, &d, idx, 3, &m, &x, &y), DDP_OK);
    cr_assert_eq(x, x0);
    cr_assert_eq(y, y0);
    for (int r = 0; r < 3; r++)
        cr_assert_arr_eq(x0 + r * 6, d.x + idx[r] * 6, 6 * sizeof(float));
    step_meter_free(&m);
    stager_free(&s);
    data_free(&d);
    backend_destroy(be);
}
