/* tests/unit/test_staging.c: the double-buffered batch staging (stager_t in
 * trainer.c) on a device that is not host-visible.
 *
 * A CPU backend with host_visible cleared takes the same path as a GPU (pinned
 * buffers, h2d copies), so this runs everywhere: every staged batch must land
 * in the replica exactly, a prefetch must go to the buffer the last h2d did
 * not read, a prefetch made for another batch must not be used, and single
 * mode with --accum must end where the host-visible path ends. */
#include <criterion/criterion.h>
#include <string.h>

#include "device/backend_impl.h" /* a fake device: host memory taking the GPU path */
#include "data/data.h"
#include "nn/model.h"
#include "measure/step_meter.h"
#include "train/stage.h"

typedef struct {
    backend_t *be;
    dataset_t data;
    model_spec_t spec;
    replica_t rep;
    stager_t stg;
} fixture_t;

static void fixture_open(fixture_t *f, int max_rows)
{
    char err[ERR_LEN];
    memset(f, 0, sizeof *f);
    cr_assert_eq(backend_cpu_create(&f->be, 0, 1, err), DDP_OK, "%s", err);
    f->be->host_visible = false; /* take the GPU's path: staging buffers and h2d */
    int dims[] = {6, 4, 3};
    cr_assert_eq(model_spec_init(&f->spec, dims, 3, ACT_RELU, err), DDP_OK, "%s", err);
    cr_assert_eq(data_synthetic(&f->data, SYNTH_REGRESSION, 100, 6, 3, 1, 0.1f, err), DDP_OK, "%s",
                 err);
    cr_assert_eq(replica_init(&f->rep, f->be, &f->spec, max_rows, 3, err), DDP_OK, "%s", err);
    cr_assert_eq(stager_init(&f->stg, f->be, max_rows, &f->data, err), DDP_OK, "%s", err);
    cr_assert(stager_active(&f->stg));
}

static void fixture_close(fixture_t *f)
{
    stager_free(&f->stg);
    replica_free(&f->rep);
    data_free(&f->data);
    backend_destroy(f->be);
}

/* The replica holds exactly rows idx of the dataset. */
static void assert_batch(fixture_t *f, const uint32_t *idx, int rows, const char *what)
{
    for (int r = 0; r < rows; r++) {
        cr_assert_arr_eq(f->rep.x + (size_t)r * 6, f->data.x + (size_t)idx[r] * 6, 6 * sizeof(float),
                         "%s: x row %d", what, r);
        cr_assert_arr_eq(f->rep.y + (size_t)r * 3, f->data.y + (size_t)idx[r] * 3, 3 * sizeof(float),
                         "%s: y row %d", what, r);
    }
}

Test(staging, prefetched_batches_land_exactly_and_alternate_buffers)
{
    fixture_t f;
    fixture_open(&f, 8);
    uint32_t idx[6][8];
    int rows[6];
    for (int b = 0; b < 6; b++)
        rows[b] = b == 0 || b % 2 ? 8 : 5; /* some short batches, as at an epoch's end */
    for (int b = 0; b < 6; b++)
        for (int r = 0; r < 8; r++)
            idx[b][r] = (uint32_t)((b * 13 + r * 7) % 100);
    device_stats_t st = {0};
    step_meter_t pc;
    step_meter_init(&pc, &(step_meter_sinks_t){.dev = &st});
    step_meter_begin(&pc, 0, true, false);
    double *acc = st.phase_s;

    cr_assert_eq(stager_stage(&f.stg, &f.rep, &f.data, 0, idx[0], rows[0], &pc), DDP_OK);
    assert_batch(&f, idx[0], rows[0], "first batch (no prefetch)");
    for (int b = 1; b < 6; b++) {
        int in_flight = f.stg.last;
        stager_prefetch(&f.stg, &f.data, b, idx[b], rows[b], &pc);
        cr_assert_eq(f.stg.ready_key, b);
        cr_assert_neq(f.stg.ready_buf, in_flight, "a prefetch must not overwrite the buffer in flight");
        /* The replica still holds the previous batch: the prefetch only gathered. */
        assert_batch(&f, idx[b - 1], rows[b - 1], "before the stage");
        cr_assert_eq(backend_sync(f.be), DDP_OK); /* the caller's sync between stages */
        /* Change the dataset after the prefetch: a stage that used the
         * prefetched rows still delivers the old values, one that gathered
         * again would deliver the new ones. */
        float saved_x[8 * 6], saved_y[8 * 3];
        for (int r = 0; r < rows[b]; r++) {
            memcpy(saved_x + r * 6, f.data.x + (size_t)idx[b][r] * 6, 6 * sizeof(float));
            memcpy(saved_y + r * 3, f.data.y + (size_t)idx[b][r] * 3, 3 * sizeof(float));
        }
        for (int r = 0; r < rows[b]; r++)
            f.data.x[(size_t)idx[b][r] * 6] += 1000.0f;
        cr_assert_eq(stager_stage(&f.stg, &f.rep, &f.data, b, idx[b], rows[b], &pc), DDP_OK);
        cr_assert_eq(f.stg.ready_key, -1, "a prefetch is used once");
        cr_assert_arr_eq(f.rep.x, saved_x, (size_t)rows[b] * 6 * sizeof(float),
                         "batch %d: the stage gathered again instead of using the prefetch", b);
        cr_assert_arr_eq(f.rep.y, saved_y, (size_t)rows[b] * 3 * sizeof(float), "batch %d: y", b);
        for (int r = 0; r < rows[b]; r++) /* restore the exact values */
            memcpy(f.data.x + (size_t)idx[b][r] * 6, saved_x + r * 6, 6 * sizeof(float));
    }
    cr_assert_gt(acc[PH_H2D] + acc[PH_DATA], 0.0, "the phases are lapped");
    fixture_close(&f);
}

Test(staging, a_prefetch_for_another_batch_is_not_used)
{
    fixture_t f;
    fixture_open(&f, 4);
    uint32_t a[4] = {1, 2, 3, 4}, b[4] = {50, 60, 70, 80}, c[4] = {9, 8, 7, 6};
    device_stats_t st = {0};
    step_meter_t pc;
    step_meter_init(&pc, &(step_meter_sinks_t){.dev = &st});
    step_meter_begin(&pc, 0, true, false);
    cr_assert_eq(stager_stage(&f.stg, &f.rep, &f.data, 0, a, 4, &pc), DDP_OK);
    stager_prefetch(&f.stg, &f.data, 1, b, 4, &pc);
    /* The caller asks for batch 2 instead: it must be gathered afresh. */
    cr_assert_eq(stager_stage(&f.stg, &f.rep, &f.data, 2, c, 4, &pc), DDP_OK);
    assert_batch(&f, c, 4, "unprefetched batch");
    /* Empty prefetches do nothing. */
    stager_prefetch(&f.stg, &f.data, 3, c, 0, &pc);
    cr_assert_eq(f.stg.ready_key, -1);
    fixture_close(&f);
}

Test(staging, host_visible_devices_stage_directly)
{
    backend_t *be;
    char err[ERR_LEN];
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    dataset_t d;
    cr_assert_eq(data_synthetic(&d, SYNTH_REGRESSION, 10, 6, 3, 1, 0.1f, err), DDP_OK);
    stager_t s;
    cr_assert_eq(stager_init(&s, be, 4, &d, err), DDP_OK);
    cr_assert(!stager_active(&s), "no staging buffers on a host-visible device");
    stager_free(&s);
    data_free(&d);
    backend_destroy(be);
}
