/* dp/dp_comm.c: DP's cross-device moves: scatter (a chunk of device 0's
 * rows to a device), replicate (device 0's parameters to the replicas),
 * gather (the output chunks to device 0) and reduce (the gradients summed
 * onto device 0).  Every move between devices is a backend peer_copy queued
 * on the stream of the device that owns the destination; on CUDA that is
 * cudaMemcpyPeerAsync, which does not wait for the source device's stream,
 * so each function below states which barrier guarantees that the source
 * device has finished (synced) the work that wrote the source.
 *
 * On host-visible backends (the CPU) the replicate and the reduce are split
 * by arena slices over all k threads instead: they are memory-bound, and k
 * threads each moving 1/k of the arena finish about k times sooner than
 * device 0 (or each replica's own thread) moving whole arenas. */
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

/* After a copy made by device d's thread on backend be (begun at t0): its
 * event on d's comm lane (d's recorder: only this thread writes it) and, in
 * the run's first step, its bytes, time and count in d's first_move[mk].  A
 * copy that is only queued (a device that is not host memory) is waited for
 * first when either wants it, so the time is the copy's and not its
 * launch's; untraced steps after the first pay nothing. */
static int dp_note(dp_ctx_t *c, int d, backend_t *be, trace_kind_t tk, move_kind_t mk,
                   double t0, uint64_t bytes, int peer, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    trace_rec_t *tr = c->res->trace[d];
    if (!(tr && tr->active) && !dv->meter.first)
        return DDP_OK;
    /* Why sync: see above (the loop syncs right after anyway). */
    if (!backend_host_visible(be) && backend_sync(be) != DDP_OK)
        return dp_be_fail(be, dv, trace_kind_name(tk), err);
    double t1 = now_s();
    trace_event(tr, tk, LANE_COMM, t0, t1, bytes, -1, peer);
    if (dv->meter.first) {
        move_stat_t *m = &dv->first_move[mk];
        m->bytes += bytes;
        m->seconds += t1 - t0;
        m->ops++;
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// scatter

int dp_scatter_rows(dp_ctx_t *c, int d, float *dst, const float *src0, int cols,
                    dp_chunk_t ch, move_kind_t what, char *err)
{
    /* Source ready: device 0 synced its staging (or its loss) before the
     * barrier this thread passed to get here. */
    dp_dev_t *dv = &c->dev[d];
    backend_t *be = dv->be;
    if (ch.rows == 0)
        return DDP_OK;
    size_t bytes = (size_t)ch.rows * cols * sizeof(float);
    double t0 = now_s();
    int rc = backend_peer_copy(be, dst, c->dev[0].be, src0 + (size_t)ch.off * cols, bytes);
    if (rc != DDP_OK)
        return dp_be_fail(be, dv, "scatter", err);
    return dp_note(c, d, be, TR_SCATTER, what, t0, bytes, d, err);
}

// ---------------------------------------------------------------------------
// replicate

int dp_replicate(dp_ctx_t *c, int d, int nrep, char *err)
{
    backend_t *be0 = c->dev[0].be;
    const float *p0 = c->dev[0].rep.params;
    size_t n = c->spec.nparams;
    /* Source ready in both forms: device 0 synced after its optimizer step
     * (or after loading the initial parameters) before the barrier that ended
     * the previous step, and nobody writes its parameters until the next
     * optimizer step. */
    if (c->host_visible) {
        size_t lo, hi;
        dp_slice(n, c->k, d, &lo, &hi);
        for (int r = 1; r < nrep && hi > lo; r++) {
            /* Thread d writes slice d of replica r: host-visible copies are
             * done when they return, so it may use replica r's backend, and
             * replica r's own thread reads its parameters only after the
             * barrier that follows the replicate. */
            backend_t *be = c->dev[r].be;
            double t0 = now_s();
            int rc = backend_peer_copy(be, c->dev[r].rep.params + lo, be0, p0 + lo,
                                        (hi - lo) * sizeof(float));
            if (rc != DDP_OK)
                return dp_be_fail(be, &c->dev[r], "replicate", err);
            if ((rc = dp_note(c, d, be, TR_REPLICATE, MOVE_REPLICATE, t0,
                              (hi - lo) * sizeof(float), r, err)) != DDP_OK)
                return rc;
        }
        return DDP_OK;
    }
    if (d == 0 || d >= nrep)
        return DDP_OK;
    backend_t *be = c->dev[d].be;
    double t0 = now_s();
    int rc = backend_peer_copy(be, c->dev[d].rep.params, be0, p0, n * sizeof(float));
    if (rc != DDP_OK)
        return dp_be_fail(be, &c->dev[d], "replicate", err);
    return dp_note(c, d, be, TR_REPLICATE, MOVE_REPLICATE, t0, n * sizeof(float), d, err);
}

// ---------------------------------------------------------------------------
// gather

int dp_gather(dp_ctx_t *c, int batch, char *err)
{
    backend_t *be0 = c->dev[0].be;
    int out = model_out_dim(&c->spec);
    int nchunks = dp_chunk_count(batch, c->k);
    for (int d = 0; d < nchunks; d++) {
        dp_chunk_t ch = dp_chunk(batch, c->k, d);
        const float *src = replica_output(&c->dev[d].rep);
        size_t bytes = (size_t)ch.rows * out * sizeof(float);
        float *dst = c->gout + (size_t)ch.off * out;
        /* Source ready: every device synced its forward before the barrier
         * that device 0 passed to start the gather. */
        double t0 = now_s();
        int rc = d == 0 ? backend_d2d(be0, dst, src, bytes)
                        : backend_peer_copy(be0, dst, c->dev[d].be, src, bytes);
        if (rc != DDP_OK)
            return dp_be_fail(be0, &c->dev[0], "gather", err);
        /* chunk 0 is already on device 0: a local copy, not a move */
        if (d > 0 && (rc = dp_note(c, 0, be0, TR_GATHER, MOVE_GATHER, t0, bytes, d, err)) != DDP_OK)
            return rc;
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// reduce

int dp_reduce(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    float *g0 = c->dev[0].rep.grads;
    size_t n = c->spec.nparams;
    /* Device 0 always has gradients: chunk 0 is never empty.  The sources
     * are summed in slot order, one after the other onto device 0's arena,
     * so every element is ((g0 + g1) + g2) + ... however the arena is
     * sliced: runs are reproducible bit for bit.  Sources ready: every device
     * synced its backward before the barrier that started the reduce, and
     * has_grad was written before it too. */
    if (c->host_visible) {
        backend_t *be = dv->be;
        size_t lo, hi;
        dp_slice(n, c->k, d, &lo, &hi);
        int nsrc = 0;
        for (int s = 1; s < c->k; s++)
            nsrc += c->dev[s].has_grad;
        double t0 = now_s();
        for (size_t b = lo; b < hi; b += DP_REDUCE_BLOCK) {
            size_t len = hi - b < DP_REDUCE_BLOCK ? hi - b : DP_REDUCE_BLOCK;
            for (int s = 1; s < c->k; s++) {
                if (!c->dev[s].has_grad)
                    continue; /* sat the whole step out: nothing to add */
                int rc = backend_axpy(be, 1.0f, c->dev[s].rep.grads + b, g0 + b, len);
                if (rc != DDP_OK)
                    return dp_be_fail(be, dv, "reduce", err);
            }
        }
        /* One event for this thread's slice of every source (the blocks
         * interleave the sources, so they have no separate spans). */
        if (hi == lo || nsrc == 0)
            return DDP_OK;
        int rc = dp_note(c, d, be, TR_REDUCE, MOVE_REDUCE, t0,
                         (uint64_t)(hi - lo) * sizeof(float) * (uint64_t)nsrc, -1, err);
        if (rc == DDP_OK && dv->meter.first)
            dv->first_move[MOVE_REDUCE].ops += nsrc - 1; /* one add per source slice */
        return rc;
    }
    if (d != 0)
        return DDP_OK;
    /* Not host-visible: device 0 pulls each gradient arena into one scratch
     * arena and adds it.  Both go on device 0's stream, so the next copy into
     * the scratch is ordered after the previous add that reads it. */
    backend_t *be0 = dv->be;
    for (int s = 1; s < c->k; s++) {
        if (!c->dev[s].has_grad)
            continue;
        double t0 = now_s();
        int rc = backend_peer_copy(be0, c->gscratch, c->dev[s].be, c->dev[s].rep.grads,
                                     n * sizeof(float));
        if (rc == DDP_OK)
            rc = backend_axpy(be0, 1.0f, c->gscratch, g0, n);
        if (rc != DDP_OK)
            return dp_be_fail(be0, dv, "reduce", err);
        if ((rc = dp_note(c, 0, be0, TR_REDUCE, MOVE_REDUCE, t0, n * sizeof(float), s, err)) !=
            DDP_OK)
            return rc;
    }
    return DDP_OK;
}
