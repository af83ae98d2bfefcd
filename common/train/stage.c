/* common/train/stage.c: moving micro-batches from the dataset to a device
 * (see stage.h for the rules that keep it safe without host waits). */
#include "common/train/stage.h"

#include <string.h>

#include "common/base/status.h"

int stager_init(stager_t *s, backend_t *be, float *x0, float *y0, int max_rows, int accum,
                const dataset_t *d, char *err)
{
    memset(s, 0, sizeof *s);
    s->be = be;
    s->max_rows = max_rows;
    s->x[0] = x0;
    s->y[0] = y0;
    if (backend_host_visible(be))
        return DDP_OK;
    size_t floats = (size_t)max_rows * (size_t)(d->in_dim + d->tgt_cols);
    size_t bytes = floats * sizeof(float);
    /* Two buffers per micro-batch of a step, so a buffer's last copy belongs
     * to a step that has reported; fewer when that much pinned memory would
     * be excessive (then a stage may wait for a copy). */
    int n = 2 * (accum > 1 ? accum : 1);
    if (n > STAGE_MAX_HOST)
        n = STAGE_MAX_HOST;
    while (n > 2 && (size_t)n * bytes > STAGE_MAX_PINNED)
        n--;
    s->nhost = n;
    int rc = DDP_OK;
    for (int i = 0; i < n && rc == DDP_OK; i++) {
        if (!(s->host[i].buf = backend_alloc_host(be, bytes)) ||
            !(s->host[i].copied = backend_event_new(be, false)))
            rc = DDP_ERR_RUNTIME;
    }
    if (rc == DDP_OK && (!(s->x[1] = backend_alloc_for(be, (size_t)max_rows * d->in_dim * sizeof(float), MEM_STAGING)) ||
                         !(s->y[1] = backend_alloc_for(be, (size_t)max_rows * d->tgt_cols * sizeof(float), MEM_STAGING)) ||
                         !(s->freed = backend_event_new(be, false))))
        rc = DDP_ERR_RUNTIME;
    if (rc != DDP_OK) {
        stager_free(s);
        return err_set(err, rc, "device %d: out of memory for batch staging (%zu bytes per buffer): %s",
                       backend_device_id(be), bytes, backend_last_error(be));
    }
    return DDP_OK;
}

void stager_free(stager_t *s)
{
    backend_t *be = s->be;
    if (!be)
        return;
    if (s->nhost > 0)
        backend_sync(be); /* no copy may still read or write what is freed */
    for (int i = 0; i < STAGE_MAX_HOST; i++) {
        backend_free_host(be, s->host[i].buf);
        backend_event_free(be, s->host[i].copied);
    }
    backend_free(be, s->x[1]);
    backend_free(be, s->y[1]);
    backend_event_free(be, s->freed);
    memset(s, 0, sizeof *s);
}

int stager_stage(stager_t *s, const dataset_t *d, const uint32_t *idx, int rows, step_meter_t *m,
                 float **x, float **y)
{
    if (!stager_active(s)) {
        data_gather(d, idx, rows, s->x[0], s->y[0]);
        step_meter_staged(m, (uint64_t)(d->in_dim + d->tgt_cols) * sizeof(float));
        step_meter_lap(m, PH_DATA);
        *x = s->x[0];
        *y = s->y[0];
        return DDP_OK;
    }
    backend_t *be = s->be;
    stage_host_t *h = &s->host[s->n % s->nhost];
    int slot = (int)(s->n & 1);
    s->n++;
    /* Why check: the host is about to overwrite this pinned buffer, and the
     * copy that read it last must be over (it is, unless the ring is short;
     * then this waits). */
    bool done = true;
    TRY(backend_event_query(be, h->copied, &done));
    if (!done)
        TRY(backend_event_sync(be, h->copied));
    float *hx = h->buf, *hy = h->buf + (size_t)s->max_rows * d->in_dim;
    data_gather(d, idx, rows, hx, hy);
    step_meter_staged(m, (uint64_t)(d->in_dim + d->tgt_cols) * sizeof(float));
    step_meter_lap(m, PH_DATA);
    /* The copy stream waits for `freed` (the slot's last reader is queued
     * before it), copies, and marks h->copied. */
    TRY(backend_copy_async(be, s->x[slot], NULL, hx, (size_t)rows * d->in_dim * sizeof(float),
                           s->freed, NULL));
    TRY(backend_copy_async(be, s->y[slot], NULL, hy, (size_t)rows * d->tgt_cols * sizeof(float),
                           NULL, h->copied));
    /* Everything queued so far reads the other slot at most: the next stage,
     * which overwrites it, waits for this. */
    TRY(backend_event_record(be, s->freed));
    /* Why wait (on the GPU, not the host): this micro-step reads the slot. */
    TRY(backend_stream_wait(be, h->copied));
    step_meter_lap(m, PH_H2D);
    *x = s->x[slot];
    *y = s->y[slot];
    return DDP_OK;
}

int stager_skip(stager_t *s)
{
    if (!stager_active(s))
        return DDP_OK;
    s->n++;
    /* Why record: the slot the next stage fills was read by the step just
     * queued; its copy waits for this. */
    return backend_event_record(s->be, s->freed);
}
