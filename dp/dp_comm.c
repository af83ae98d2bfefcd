/* dp/dp_comm.c: DP's cross-device moves: scatter (a chunk of device 0's
 * rows to a device), replicate (device 0's parameters to the replicas),
 * gather (the output chunks to device 0) and reduce (the gradients summed
 * onto device 0).  Every move between devices is a backend peer_copy queued
 * on the stream of the device that owns the destination; on CUDA that is
 * cudaMemcpyPeerAsync, which does not wait for the source device's stream,
 * so each function below states which barrier guarantees that the source
 * device's work that wrote the source comes first (a barrier orders the
 * devices' queues as well as the threads, see dp_wait).
 *
 * On host-visible backends (the CPU) the replicate and the reduce of an
 * arena of DP_SLICED_MIN floats or more are split by arena slices over all
 * k threads instead: they are memory-bound, and k threads each moving 1/k
 * of the arena finish about k times sooner than device 0 (or each
 * replica's own thread) moving whole arenas.  A smaller arena moves whole:
 * each replica's thread copies device 0's parameters, device 0 sums the
 * gradients (dp_sliced). */
#include "dp/dp.h"

/* Floats summed per pass: one block of every source plus the destination
 * stay in L2 while the k-1 sources are added in, so the destination is read
 * and written once per block instead of once per source. */
#define DP_REDUCE_BLOCK 8192

static int dp_be_fail(backend_t *be, const dp_dev_t *dv, const char *what, char *err)
{
    return err_set(err, DDP_ERR_RUNTIME, "%s: %s: %s", dv->name, what, backend_last_error(be));
}

// ---------------------------------------------------------------------------
// what a copy leaves for --trace and --explain

/* Before a copy made by device d's thread: a marker, when --trace or
 * --explain's told step wants the copy; -1 otherwise (untraced steps after
 * the first pay nothing). */
static int dp_mark(dp_ctx_t *c, int d)
{
    dp_dev_t *dv = &c->dev[d];
    /* a graph step marks always: its work is the same every step */
    if (!c->res->trace[d] && !step_meter_marks(&dv->meter))
        return -1;
    return step_meter_mark(&dv->meter);
}

/* After it: its event on d's comm lane and, in the told step (--explain), a
 * move of kind mk (the two markers bracket the copy on d's queue: the meter
 * times it once the step has run). */
static void dp_note(dp_ctx_t *c, int d, int mark0, trace_kind_t tk, move_kind_t mk,
                    uint64_t bytes, int peer)
{
    dp_dev_t *dv = &c->dev[d];
    if (mark0 < 0)
        return;
    step_meter_span(&dv->meter, mark0, step_meter_mark(&dv->meter),
                    &(meter_span_t){.kind = tk, .lane = LANE_COMM, .bytes = bytes, .bucket = -1,
                                    .peer = peer, .move = mk});
}

// ---------------------------------------------------------------------------
// scatter

int dp_scatter_rows(dp_ctx_t *c, int d, float *dst, const float *src0, int cols,
                    dp_chunk_t ch, move_kind_t what, char *err)
{
    /* Source ready: device 0 queued its staging (or its loss) before the
     * barrier this thread passed to get here. */
    dp_dev_t *dv = &c->dev[d];
    backend_t *be = dv->be;
    if (d == 0 || ch.rows == 0)
        return DDP_OK;
    size_t bytes = (size_t)ch.rows * cols * sizeof(float);
    int mk = dp_mark(c, d);
    int rc = backend_peer_copy(be, dst, c->dev[0].be, src0 + (size_t)ch.off * cols, bytes);
    if (rc != DDP_OK)
        return dp_be_fail(be, dv, "scatter", err);
    dp_note(c, d, mk, TR_SCATTER, what, bytes, d);
    step_meter_lap(&dv->meter, PH_SCATTER);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// replicate

/* Device d's part of one NCCL collective on its arena (broadcast from device
 * 0, or a sum onto device 0), waited for on the device, not the host. */
static int dp_collective(dp_ctx_t *c, int d, coll_kind_t kind, float *arena, const char *tag,
                         char *err)
{
    dp_dev_t *dv = &c->dev[d];
    comm_op_t op = {.kind = kind, .recv = arena, .count = c->spec.nparams, .redop = REDOP_SUM,
                    .root = 0, .tag = tag};
    comm_handle_t h = 0;
    int rc = comm_launch(dv->comm, &op, &h);
    if (rc == DDP_OK)
        rc = comm_wait(dv->comm, h, NULL);
    if (rc != DDP_OK)
        return err_set(err, rc, "%s: %s: %s", dv->name, tag, comm_last_error(dv->comm));
    return DDP_OK;
}

static int replicate(dp_ctx_t *c, int d, int nrep, char *err)
{
    backend_t *be0 = c->dev[0].be;
    const float *p0 = c->dev[0].rep.params;
    size_t n = c->spec.nparams;
    /* Source ready in both forms: device 0 queued its optimizer step (or
     * synced the initial parameters) before the barrier that ended the
     * previous step, and nobody writes its parameters until the next
     * optimizer step. */
    if (c->host_visible && !dp_sliced(n)) {
        if (d == 0 || d >= nrep)
            return DDP_OK;
        /* Its own replica, whole: one thread writes it and reads it next. */
        backend_t *be = c->dev[d].be;
        int mk = dp_mark(c, d);
        if (backend_peer_copy(be, c->dev[d].rep.params, be0, p0, n * sizeof(float)) != DDP_OK)
            return dp_be_fail(be, &c->dev[d], "replicate", err);
        dp_note(c, d, mk, TR_REPLICATE, MOVE_REPLICATE, n * sizeof(float), d);
        return DDP_OK;
    }
    if (c->host_visible) {
        size_t lo, hi;
        dp_slice(n, c->ndev, d, &lo, &hi);
        for (int r = 1; r < nrep && hi > lo; r++) {
            /* Thread d writes slice d of replica r: host-visible copies are
             * done when they return, so it may use replica r's backend, and
             * replica r's own thread reads its parameters only after the
             * barrier that follows the replicate. */
            backend_t *be = c->dev[r].be;
            int mk = dp_mark(c, d);
            int rc = backend_peer_copy(be, c->dev[r].rep.params + lo, be0, p0 + lo,
                                        (hi - lo) * sizeof(float));
            if (rc != DDP_OK)
                return dp_be_fail(be, &c->dev[r], "replicate", err);
            dp_note(c, d, mk, TR_REPLICATE, MOVE_REPLICATE, (hi - lo) * sizeof(float), r);
        }
        return DDP_OK;
    }
    if (c->nccl) {
        /* Every device joins the broadcast (a collective), rows or not. */
        int mk = d > 0 ? dp_mark(c, d) : -1;
        TRY(dp_collective(c, d, COLL_BROADCAST, c->dev[d].rep.params, "replicate", err));
        dp_note(c, d, mk, TR_REPLICATE, MOVE_REPLICATE, n * sizeof(float), d);
        return DDP_OK;
    }
    if (d == 0 || d >= nrep)
        return DDP_OK;
    backend_t *be = c->dev[d].be;
    int mk = dp_mark(c, d);
    int rc = backend_peer_copy(be, c->dev[d].rep.params, be0, p0, n * sizeof(float));
    if (rc != DDP_OK)
        return dp_be_fail(be, &c->dev[d], "replicate", err);
    dp_note(c, d, mk, TR_REPLICATE, MOVE_REPLICATE, n * sizeof(float), d);
    return DDP_OK;
}

static void prefetch(const float *p, size_t floats)
{
    for (size_t i = 0; i < floats; i += 16) /* a 64-byte line */
        __builtin_prefetch(p + i, 0, 3);
    if (floats > 0)
        __builtin_prefetch(p + floats - 1, 0, 3);
}

void dp_prefetch_next(const dp_ctx_t *c, int d, const dp_plan_t *pl)
{
    /* Why: those are the first reads of d's step and each is a cache miss
     * to another core (about 0.3 us on this project's VM), one after the
     * other, while the step meter's report of the step that ended
     * runs first; a prefetch starts them all at once, now.  Only what the
     * whole-arena path reads (dp_sliced), a few lines. */
    size_t n = c->spec.nparams;
    if (d == 0 || !c->host_visible || dp_sliced(n) || pl->nmicro < 1)
        return;
    if (d < pl->nrep)
        prefetch(c->dev[0].rep.params, n);
    dp_chunk_t ch = dp_chunk(pl->rows[0], c->ndev, d);
    int in = model_in_dim(&c->spec);
    if (ch.rows > 0)
        prefetch(c->gx + (size_t)ch.off * in, (size_t)ch.rows * in);
}

int dp_replicate(dp_ctx_t *c, int d, int nrep, char *err)
{
    TRY(replicate(c, d, nrep, err));
    step_meter_lap(&c->dev[d].meter, PH_REPLICATE);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// gather

int dp_gather(dp_ctx_t *c, int batch, char *err)
{
    backend_t *be0 = c->dev[0].be;
    int out = model_out_dim(&c->spec);
    int nchunks = dp_chunk_count(batch, c->ndev);
    for (int d = 0; d < nchunks; d++) {
        dp_chunk_t ch = dp_chunk(batch, c->ndev, d);
        const float *src = replica_output(&c->dev[d].rep);
        size_t bytes = (size_t)ch.rows * out * sizeof(float);
        float *dst = c->gout + (size_t)ch.off * out;
        /* Source ready: every device queued its forward before the barrier
         * that device 0 passed to start the gather. */
        int mk = d > 0 ? dp_mark(c, 0) : -1; /* chunk 0 is already on device 0: not a move */
        int rc = d == 0 ? backend_d2d(be0, dst, src, bytes)
                        : backend_peer_copy(be0, dst, c->dev[d].be, src, bytes);
        if (rc != DDP_OK)
            return dp_be_fail(be0, &c->dev[0], "gather", err);
        dp_note(c, 0, mk, TR_GATHER, MOVE_GATHER, bytes, d);
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// reduce

/* Device 0: queue the copy of source s's gradient arena into scratch b on
 * the copy stream, after everything queued on the compute stream so far. */
static int dp_reduce_copy(dp_ctx_t *c, int s, int b, int *mk, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    backend_t *be0 = dv->be;
    *mk = dp_mark(c, 0);
    if (backend_event_record(be0, c->red_free) != DDP_OK ||
        backend_copy_async(be0, c->gscratch[b], c->dev[s].be, c->dev[s].rep.grads,
                           c->spec.nparams * sizeof(float), c->red_free,
                           c->red_copied[b]) != DDP_OK)
        return dp_be_fail(be0, dv, "reduce", err);
    return DDP_OK;
}

static int reduce(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    float *g0 = c->dev[0].rep.grads;
    size_t n = c->spec.nparams;
    /* Device 0 always has gradients: chunk 0 is never empty.  The sources
     * are summed in slot order, one after the other onto device 0's arena,
     * so every element is ((g0 + g1) + g2) + ... however the arena is
     * sliced: runs are reproducible bit for bit.  Sources ready: every device
     * queued its backward before the barrier that started the reduce, and
     * has_grad was written before it too. */
    if (c->host_visible) {
        backend_t *be = dv->be;
        size_t lo = 0, hi = n; /* device 0 sums it whole (dp_sliced) */
        if (dp_sliced(n))
            dp_slice(n, c->ndev, d, &lo, &hi);
        else if (d != 0)
            return DDP_OK;
        int nsrc = 0;
        for (int s = 1; s < c->ndev; s++)
            nsrc += c->dev[s].t.has_grad;
        int mk = dp_mark(c, d);
        for (size_t b = lo; b < hi; b += DP_REDUCE_BLOCK) {
            size_t len = hi - b < DP_REDUCE_BLOCK ? hi - b : DP_REDUCE_BLOCK;
            for (int s = 1; s < c->ndev; s++) {
                if (!c->dev[s].t.has_grad)
                    continue; /* sat the whole step out: nothing to add */
                int rc = backend_axpy(be, 1.0f, c->dev[s].rep.grads + b, g0 + b, len);
                if (rc != DDP_OK)
                    return dp_be_fail(be, dv, "reduce", err);
            }
        }
        /* One event for this thread's slice of every source (the blocks
         * interleave the sources, so they have no separate spans), counted
         * as nsrc operations: one add per source slice. */
        if (hi == lo || nsrc == 0)
            return DDP_OK;
        if (mk >= 0)
            step_meter_span(&dv->meter, mk, step_meter_mark(&dv->meter),
                            &(meter_span_t){.kind = TR_REDUCE, .lane = LANE_COMM,
                                            .bytes = (uint64_t)(hi - lo) * sizeof(float) * nsrc,
                                            .bucket = -1, .peer = -1, .move = MOVE_REDUCE,
                                            .ops = nsrc});
        return DDP_OK;
    }
    if (c->nccl) {
        /* One reduce onto device 0, which every device joins; a device that
         * sat the whole step out adds zeros, not last step's gradients. */
        if (!dv->t.has_grad && backend_memset0(dv->be, dv->rep.grads, n * sizeof(float)) != DDP_OK)
            return dp_be_fail(dv->be, dv, "reduce", err);
        int mk = d > 0 && dv->t.has_grad ? dp_mark(c, d) : -1;
        TRY(dp_collective(c, d, COLL_REDUCE, dv->rep.grads, "reduce", err));
        dp_note(c, d, mk, TR_REDUCE, MOVE_REDUCE, n * sizeof(float), d);
        return DDP_OK;
    }
    if (d != 0)
        return DDP_OK;
    /* Not host-visible: device 0 pulls each gradient arena on its copy stream
     * into one of two scratch arenas and adds it on its compute stream, so
     * the copy of source j+1 overlaps the add of source j.  Events order the
     * rest:
     *   - red_free, recorded on the compute stream before a copy is queued:
     *     the copy starts after everything queued there so far -- the
     *     barrier's waits for the sources' backward, and the add that last
     *     read the scratch arena it refills (two sources back);
     *   - red_copied[b]: the add of scratch b waits for its copy. */
    backend_t *be0 = dv->be;
    int src[MAX_DEVICES], nsrc = 0;
    for (int s = 1; s < c->ndev; s++)
        if (c->dev[s].t.has_grad)
            src[nsrc++] = s;
    if (backend_graph_state(be0, NULL, NULL) != GRAPH_EAGER) {
        /* A graph step: device 0's copy stream is not in the graph, so each
         * arena is pulled on the compute stream, then added, in slot order
         * (the same sums as below, without the overlap). */
        for (int j = 0; j < nsrc; j++) {
            int mk = dp_mark(c, 0);
            if (backend_peer_copy(be0, c->gscratch[0], c->dev[src[j]].be,
                                  c->dev[src[j]].rep.grads, n * sizeof(float)) != DDP_OK ||
                backend_axpy(be0, 1.0f, c->gscratch[0], g0, n) != DDP_OK)
                return dp_be_fail(be0, dv, "reduce", err);
            dp_note(c, 0, mk, TR_REDUCE, MOVE_REDUCE, n * sizeof(float), src[j]);
        }
        return DDP_OK;
    }
    int mk[MAX_DEVICES];
    for (int j = 0; j < nsrc && j < 2; j++)
        TRY(dp_reduce_copy(c, src[j], j & 1, &mk[j], err));
    for (int j = 0; j < nsrc; j++) {
        int b = j & 1;
        if (backend_stream_wait(be0, c->red_copied[b]) != DDP_OK ||
            backend_axpy(be0, 1.0f, c->gscratch[b], g0, n) != DDP_OK)
            return dp_be_fail(be0, dv, "reduce", err);
        dp_note(c, 0, mk[j], TR_REDUCE, MOVE_REDUCE, n * sizeof(float), src[j]);
        if (j + 2 < nsrc)
            TRY(dp_reduce_copy(c, src[j + 2], b, &mk[j + 2], err));
    }
    return DDP_OK;
}

int dp_reduce(dp_ctx_t *c, int d, char *err)
{
    TRY(reduce(c, d, err));
    step_meter_lap(&c->dev[d].meter, PH_COMM_EXPOSED);
    return DDP_OK;
}
