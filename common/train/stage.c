/* common/train/stage.c: moving micro-batches from the dataset to a device
 * (see stage.h). */
#include "train/stage.h"

#include <string.h>

#include "base/status.h"

/* Queue the h2d of a gathered batch (staging holds max_rows rows of x, then of y). */
static int stage_h2d(replica_t *r, const dataset_t *d, const float *staging, int max_rows,
                     int rows, step_meter_t *m)
{
    backend_t *be = r->be;
    const float *sx = staging, *sy = staging + (size_t)max_rows * d->in_dim;
    int rc = backend_h2d(be, r->x, sx, (size_t)rows * d->in_dim * sizeof(float));
    if (rc == DDP_OK)
        rc = backend_h2d(be, r->y, sy, (size_t)rows * d->tgt_cols * sizeof(float));
    step_meter_lap(m, PH_H2D);
    return rc;
}

int stage_batch(replica_t *r, const dataset_t *d, const uint32_t *idx, int rows,
                float *staging, step_meter_t *m)
{
    backend_t *be = r->be;
    if (backend_host_visible(be)) {
        data_gather(d, idx, rows, r->x, r->y);
        step_meter_lap(m, PH_DATA);
        return DDP_OK;
    }
    data_gather(d, idx, rows, staging, staging + (size_t)r->max_rows * d->in_dim);
    step_meter_lap(m, PH_DATA);
    return stage_h2d(r, d, staging, r->max_rows, rows, m);
}

// ---------------------------------------------------------------------------
// double-buffered staging

int stager_init(stager_t *s, backend_t *be, int max_rows, const dataset_t *d, char *err)
{
    memset(s, 0, sizeof *s);
    s->be = be;
    s->max_rows = max_rows;
    s->last = -1;
    s->ready_key = -1;
    if (backend_host_visible(be))
        return DDP_OK;
    size_t bytes = (size_t)max_rows * (size_t)(d->in_dim + d->tgt_cols) * sizeof(float);
    for (int i = 0; i < 2; i++)
        if (!(s->buf[i] = backend_alloc_host(be, bytes))) {
            stager_free(s);
            return err_set(err, DDP_ERR_RUNTIME, "device %d: out of pinned memory (%zu bytes): %s",
                           backend_device_id(be), bytes, backend_last_error(be));
        }
    return DDP_OK;
}

void stager_free(stager_t *s)
{
    for (int i = 0; i < 2; i++)
        if (s->buf[i])
            backend_free_host(s->be, s->buf[i]);
    s->buf[0] = s->buf[1] = NULL;
}

static float *stager_gather(stager_t *s, int b, const dataset_t *d, const uint32_t *idx, int rows)
{
    float *buf = s->buf[b];
    data_gather(d, idx, rows, buf, buf + (size_t)s->max_rows * d->in_dim);
    return buf;
}

int stager_stage(stager_t *s, replica_t *r, const dataset_t *d, long key, const uint32_t *idx,
                 int rows, step_meter_t *m)
{
    if (!stager_active(s))
        return stage_batch(r, d, idx, rows, NULL, m);
    int b;
    if (key >= 0 && key == s->ready_key) {
        b = s->ready_buf; /* gathered while the device ran the previous micro-step */
    } else {
        b = s->last < 0 ? 0 : s->last ^ 1;
        stager_gather(s, b, d, idx, rows);
        step_meter_lap(m, PH_DATA);
    }
    s->ready_key = -1;
    s->last = b;
    /* Why the other buffer is free for the next gather: this h2d reads buf[b]
     * only; the caller syncs before the next stage (see stage.h). */
    return stage_h2d(r, d, s->buf[b], s->max_rows, rows, m);
}

void stager_prefetch(stager_t *s, const dataset_t *d, long key, const uint32_t *idx, int rows,
                     step_meter_t *m)
{
    if (!stager_active(s) || rows <= 0)
        return;
    /* Not the buffer the last h2d read (it may still be in flight); the one
     * before it was read by an h2d that a sync has since completed. */
    int b = s->last < 0 ? 0 : s->last ^ 1;
    stager_gather(s, b, d, idx, rows);
    s->ready_key = key;
    s->ready_buf = b;
    step_meter_lap(m, PH_DATA);
}
