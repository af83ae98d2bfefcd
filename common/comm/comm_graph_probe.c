/* common/comm/comm_graph_probe.c: comm.h's comm_graph_probe, the protocol every rank follows
 * (DDP's ranks and DP's device threads alike); the capture itself is the implementation's
 * (comm_ops_t's probe_capture / _launch / _drop: NCCL's). */
#include "common/comm/comm_impl.h"

/* Floats in the probe's all-reduce: a few, so a sum is checked per element. */
#define PROBE_FLOATS 4

/* What rank q puts in element i: small integers, exact in fp32 summed over any group. */
static float probe_value(int q, int i) { return (float)(1 + q * PROBE_FLOATS + i); }

/* The agreement: an eager all-reduce of one flag per rank (1: it could not capture), so every
 * rank learns the same lowest refusing rank.  Eager: it decides whether anything is captured. */
static int agree(comm_t *c, float *flags, bool refused, int *lowest, char *err)
{
    float host[MAX_DEVICES];
    int w = c->world;
    for (int q = 0; q < w; q++)
        host[q] = q == c->rank && refused ? 1.0f : 0.0f;
    TRY(backend_check(c->be, backend_h2d(c->be, flags, host, (size_t)w * sizeof(float)), NULL,
                      err));
    TRY(comm_check(c, comm_all_reduce(c, flags, (size_t)w, REDOP_SUM), NULL, err));
    /* Why a host wait: the answer decides what the host does next (the watch bounds it). */
    TRY(backend_check(c->be, backend_d2h(c->be, host, flags, (size_t)w * sizeof(float)), NULL,
                      err));
    *lowest = -1;
    for (int q = 0; q < w && *lowest < 0; q++)
        if (host[q] != 0.0f)
            *lowest = q;
    return DDP_OK;
}

/* Launch the captured all-reduce and check what it summed. */
static int launch_and_check(comm_t *c, void *graph, float *buf, char *err)
{
    comm_handle_t h;
    TRY(comm_check(c, c->ops->probe_launch(c, graph, &h), "the captured all-reduce", err));
    backend_count_launch(c->be, LAUNCH_GRAPH, 1);
    /* Why: the copy back below reads what the graph summed. */
    TRY(comm_check(c, comm_wait(c, h, NULL), "the captured all-reduce", err));
    float got[PROBE_FLOATS];
    TRY(backend_check(c->be, backend_d2h(c->be, got, buf, sizeof got), NULL, err));
    for (int i = 0; i < PROBE_FLOATS; i++) {
        float want = 0.0f;
        for (int q = 0; q < c->world; q++)
            want += probe_value(q, i);
        if (got[i] != want)
            return err_set(err, DDP_ERR_RUNTIME,
                           "a CUDA graph's captured all-reduce summed %g in element %d, not %g: "
                           "the captured collective is wrong",
                           (double)got[i], i, (double)want);
    }
    return DDP_OK;
}

int comm_graph_probe(comm_t *c, bool insist, comm_graph_probe_t *out, char *err)
{
    out->refused_by = -1;
    out->why[0] = 0;
    if (!c->ops->probe_capture) {
        out->refused_by = 0;
        return err_set(insist ? err : c->rank == 0 ? out->why : NULL,
                       insist ? DDP_ERR_RUNTIME : DDP_OK,
                       "--comm %s: its collectives are not captured", c->ops->name);
    }
    /* the probe's buffer, then the agreement's flags */
    float *buf = backend_alloc_for(c->be, (PROBE_FLOATS + MAX_DEVICES) * sizeof(float), MEM_COMM);
    if (!buf)
        return err_set(err, DDP_ERR_RUNTIME, "out of device memory for the CUDA graph probe");
    float init[PROBE_FLOATS];
    for (int i = 0; i < PROBE_FLOATS; i++)
        init[i] = probe_value(c->rank, i);
    void *graph = NULL;
    int rc = backend_check(c->be, backend_h2d(c->be, buf, init, sizeof init), NULL, err);
    if (rc == DDP_OK)
        rc = comm_check(c, c->ops->probe_capture(c, buf, PROBE_FLOATS, &graph, out->why),
                        "capturing an all-reduce", err);
    if (rc == DDP_OK && !graph && insist) /* fail first: the others' agreement sees our abort */
        rc = err_set(err, DDP_ERR_RUNTIME, "%s", out->why);
    int lowest = -1;
    bool queued = rc == DDP_OK; /* from here collectives of ours may be on the device */
    if (rc == DDP_OK)
        rc = agree(c, buf + PROBE_FLOATS, graph == NULL, &lowest, err);
    if (rc == DDP_OK && lowest < 0)
        rc = launch_and_check(c, graph, buf, err);
    if (rc == DDP_OK && lowest >= 0) {
        out->refused_by = lowest;
        if (lowest != c->rank)
            out->why[0] = 0;
        if (insist) /* a peer could not: it fails with its reason, we with this */
            rc = err_set(err, DDP_ERR_RUNTIME, "rank %d could not capture its all-reduce",
                         lowest);
    }
    if (graph)
        c->ops->probe_drop(c, graph);
    /* A failure once the agreement was queued may leave our all-reduce waiting on the device
     * for a peer that never comes, reading and writing buf.  Why abort here, after the graph
     * is gone (NCCL aborts only once no graph holds its collectives) and before the free: the
     * abort releases that collective and the free waits for the device, so buf outlives every
     * use (freed first, it would wait forever).  On success nothing of ours is queued. */
    if (rc != DDP_OK && queued)
        comm_abort(c, err);
    backend_free(c->be, buf);
    return rc;
}
