/* dp/dp_graph.c: DataParallel's full steps replayed as one CUDA graph that
 * spans every device (--cuda-graph).
 *
 * Why one graph and not one per device: a graph's wait for an event pairs
 * with the record that event holds when the graph is launched, and DP's
 * devices wait for each other in both directions within one step (dp_wait),
 * so no order of per-device launches pairs every wait with the same step's
 * record.
 *
 * So device 0, the leader, captures the step on its compute stream and
 * records a fork inside it; after a host barrier every other device's stream
 * waits for the fork, which joins that stream to the capture (CUDA captures
 * per stream: each device thread keeps queuing its own part on its own
 * stream, as it does eagerly).  The step's barriers (dp_wait) record and wait
 * inside the graph, each wait for the same step's record (the backend
 * refuses any other).  At the end each member records its join, device 0
 * waits for every join, ends the capture, instantiates and launches; a
 * barrier then shares the outcome, so every device knows alike whether the
 * key (the step's parity) holds a graph.  On the key's later steps device 0
 * launches it and the members follow: their step code still runs on the
 * host and is checked against the capture, queuing nothing.
 *
 * What a graph step does differently (dp_step.c, dp_comm.c): device 0
 * stages the batch before the graph begins (the copy stream is outside it),
 * the peer-copy reduce pulls on the compute stream, and the loss is fetched
 * and the copies are marked on every graph step, so each queues the same
 * work.
 *
 * Failures: a device that fails inside a graph step fails the pool (dp.c),
 * every barrier opens at once and every device leaves the step with an
 * error, ending nothing there.  Device 0 ends a capture left open only once
 * every device has stopped queuing into it (dp_graph_abandon, after the exit
 * barrier); a member never ends one (CUDA refuses that on a stream that only
 * joined another's capture, and invalidates it).
 *
 * Over NCCL (graphs there only under --cuda-graph on), before anything
 * trains, every device probes whether NCCL captures at all (dp_graph_probe:
 * the policy DDP's ranks follow too, common/train/graph_probe.h): a refusal
 * ends the run there, naming the device, not at the first graph step. */
#include <stdio.h>

#include "dp/dp.h"
#include "common/train/graph_probe.h"

static int stopped(char *err)
{
    return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
}

int dp_graph_probe(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    bool graphs = c->graphs;
    char refused[ERR_LEN];
    if (!graphs || !c->nccl)
        return DDP_OK;
    /* Only under --cuda-graph on: auto runs dp over NCCL eagerly
     * (config_graph_why_not), so the probe insists and a refusal fails the
     * run here; there is no eager fallback for the devices to agree on. */
    int rc = trainer_graph_probe(c->cfg, dv->comm, dv->name, "every device", &graphs, refused, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "%s", dv->name);
    return DDP_OK;
}

bool dp_graph_step(const dp_ctx_t *c, const dp_plan_t *pl, long g)
{
    /* After the first step (SGD's first momentum step is other work), one
     * micro-batch of the whole batch: an epoch's short last batch is other
     * work, run eagerly between replays. */
    return c->graphs && g > c->start_step && pl->nmicro == 1 && pl->rows[0] == c->cfg->batch;
}

int dp_graph_fork(dp_ctx_t *c, int d, long g, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    backend_t *be0 = c->dev[0].be;
    int key = (int)(g & 1);
    if (d == 0) {
        dv->in_graph = true;
        TRY(backend_check(be0, backend_graph_begin(be0, key), dv->name, err));
        TRY(backend_check(be0, backend_event_record(be0, c->fork), dv->name, err));
    }
    /* Barrier: device 0 is in the graph step and its fork is recorded. */
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return stopped(err);
    if (d != 0) {
        dv->in_graph = true;
        TRY(backend_check(dv->be, backend_graph_follow(dv->be, key, be0, c->fork), dv->name, err));
    }
    return DDP_OK;
}

int dp_graph_join(dp_ctx_t *c, int d, bool next_eager, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    backend_t *be = dv->be, *be0 = c->dev[0].be;
    int key = -1;
    backend_graph_state(be, &key, NULL);
    if (d != 0) /* after everything this device queued in the step */
        TRY(backend_check(be, backend_event_record(be, dv->join), dv->name, err));
    /* Barrier: every member has queued its last work of the step. */
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return stopped(err);
    if (d == 0) {
        /* The joins: CUDA ends a capture only when every stream that
         * joined it was joined back, its last work waited for. */
        for (int e = 1; e < c->ndev; e++)
            TRY(backend_check(be0, backend_stream_wait(be0, c->dev[e].join), dv->name, err));
        dv->in_graph = false;
        TRY(backend_check(be0, backend_graph_end(be0, key, true), dv->name, err));
        /* A member's next eager work waits for this: it must come after
         * the graph's work on that member's device, which its own stream
         * does not order (the graph runs from device 0's stream). */
        if (next_eager)
            TRY(backend_check(be0, backend_event_record(be0, c->after), dv->name, err));
    }
    /* Barrier: the outcome.  Device 0 failed the pool if it could not end,
     * instantiate or launch the graph: then no device goes on. */
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return stopped(err);
    if (d != 0) {
        dv->in_graph = false;
        TRY(backend_check(be, backend_graph_end(be, key, true), dv->name, err));
        if (next_eager)
            TRY(backend_check(be, backend_stream_wait(be, c->after), dv->name, err));
    }
    return DDP_OK;
}

void dp_graph_abandon(dp_ctx_t *c, int d)
{
    dp_dev_t *dv = &c->dev[d];
    int key = -1;
    dv->in_graph = false;
    if (!dv->be)
        return;
    /* launch false: device 0 ends (and drops) its capture; a member only
     * forgets the step */
    if (backend_graph_state(dv->be, &key, NULL) != GRAPH_EAGER)
        backend_graph_end(dv->be, key, false);
    /* Why wait: a graph device 0 launched runs every device's part from
     * device 0's stream, which the members' own teardown waits do not
     * cover; they free their buffers only after this (the exit barrier's
     * second round).  Then device 0 destroys its graphs, before any device
     * destroys or aborts its communicator (dp_device_free, after that
     * round): NCCL frees a communicator only once no CUDA graph holds its
     * captured collectives, and device 0's graphs hold every device's. */
    if (d == 0 && c->graphs) {
        backend_sync(dv->be);
        backend_graph_reset(dv->be);
    }
}
