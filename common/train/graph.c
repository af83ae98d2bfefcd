/* common/train/graph.c: --cuda-graph's steps for the three strategies (see
 * graph.h).
 *
 * A group (DP's devices) shares one graph.  Why not one per device: a
 * graph's wait for an event pairs with the record that event holds when the
 * graph is launched, and DP's devices wait for each other in both
 * directions within one step (its barriers), so no order of per-device
 * launches pairs every wait with the same step's record.  So the leader
 * (device 0) captures the step on its compute stream and records a fork
 * inside it; after a host barrier every member's stream waits for the fork,
 * which joins that stream to the capture (CUDA captures per stream: each
 * device thread keeps queuing its own part on its own stream, as it does
 * eagerly).  The step's barriers record and wait inside the graph, each
 * wait for the same step's record (the backend refuses any other).  At the
 * end each member records its join, the leader waits for every join, ends
 * the capture, instantiates and launches; a barrier then shares the
 * outcome, so every device knows alike whether the key holds a graph.  On
 * the key's later steps the leader launches it and the members follow:
 * their step code still runs on the host and is checked against the
 * capture, queuing nothing.
 *
 * Failures: a member that fails inside a graph step fails the group, every
 * barrier opens at once and every device leaves the step with an error,
 * ending nothing there.  The leader ends a capture left open only once
 * every device has stopped queuing into it (graph_abandon, after the
 * group's exit barrier); a member never ends one (CUDA refuses that on a
 * stream that only joined another's capture, and invalidates it). */
#include <stdio.h>

#include "common/train/graph.h"

static int stopped(char *err)
{
    return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
}

static int dev(const graph_t *g, int rc, char *err) { return backend_check(g->be, rc, g->place, err); }

int graph_init(graph_t *g, bool on, backend_t *be, step_meter_t *m, const char *place, long first,
               graph_group_t *group, int index, char *err)
{
    *g = (graph_t){.be = be, .meter = m, .place = place, .on = on, .first = first, .key = -1,
                   .group = group, .index = index};
    if (!on || !group)
        return DDP_OK;
    group->member[index] = g;
    bool ok = index == 0 ? (group->fork = backend_event_new(be, false)) &&
                               (group->after = backend_event_new(be, false))
                         : (g->join = backend_event_new(be, false)) != NULL;
    return ok ? DDP_OK : backend_check(be, DDP_ERR_RUNTIME, place, err);
}

void graph_free(graph_t *g)
{
    if (!g->be)
        return;
    backend_event_free(g->be, g->join);
    if (g->group && g->index == 0) {
        backend_event_free(g->be, g->group->fork);
        backend_event_free(g->be, g->group->after);
        g->group->fork = g->group->after = NULL;
    }
    g->join = NULL;
}

bool graph_arm(graph_t *g, long step, bool eligible)
{
    g->armed = g->on && step > g->first && eligible;
    g->key = -1;
    if (g->armed)
        g->key = -2 - (int)(step & 1); /* begun at graph_open */
    step_meter_same_work(g->meter, g->armed);
    return g->armed;
}

int graph_open(graph_t *g)
{
    if (g->key > -2)
        return DDP_OK; /* eager, or begun */
    int key = -2 - g->key;
    TRY(backend_graph_begin(g->be, key));
    g->key = key;
    return DDP_OK;
}

int graph_close(graph_t *g, int rc, char *err)
{
    int key = g->key;
    g->key = -1;
    if (key < 0)
        return rc;
    int rc2 = backend_graph_end(g->be, key, rc == DDP_OK);
    return rc == DDP_OK ? dev(g, rc2, err) : rc;
}

void graph_reset(graph_t *g) { backend_graph_reset(g->be); }

void graph_abandon(graph_t *g)
{
    int key = -1;
    g->key = -1;
    if (!g->be)
        return;
    /* launch false: the leader (or a device alone) ends and drops its
     * capture; a member only forgets the step */
    if (backend_graph_state(g->be, &key, NULL) != GRAPH_EAGER)
        backend_graph_end(g->be, key, false);
    if (g->group && g->index != 0)
        return;
    /* Why the leader waits: a graph it launched runs every member's part
     * from its stream, which the members' own teardown waits do not cover;
     * they free their buffers only after this.  A device alone does not:
     * its communicator's deferred abort, released by the drop, is what ends
     * NCCL's kernels that wait for a peer, before its teardown waits. */
    if (g->group && g->on)
        backend_sync(g->be);
    backend_graph_reset(g->be);
}

// ---------------------------------------------------------------------------
// a group's step

int graph_fork(graph_t *g, long step, char *err)
{
    graph_group_t *gr = g->group;
    backend_t *lead = gr->member[0]->be;
    int key = (int)(step & 1);
    if (g->index == 0) {
        TRY(dev(g, backend_graph_begin(lead, key), err));
        g->key = key;
        TRY(dev(g, backend_event_record(lead, gr->fork), err));
    }
    /* Barrier: the leader is in the graph step and its fork is recorded. */
    if (gr->sync(gr->ctx) != DDP_OK)
        return stopped(err);
    if (g->index != 0) {
        TRY(dev(g, backend_graph_follow(g->be, key, lead, gr->fork), err));
        g->key = key;
    }
    return DDP_OK;
}

int graph_join(graph_t *g, bool next_eager, char *err)
{
    graph_group_t *gr = g->group;
    int key = g->key;
    if (g->index != 0) /* after everything this device queued in the step */
        TRY(dev(g, backend_event_record(g->be, g->join), err));
    /* Barrier: every member has queued its last work of the step. */
    if (gr->sync(gr->ctx) != DDP_OK)
        return stopped(err);
    if (g->index == 0) {
        /* The joins: CUDA ends a capture only when every stream that
         * joined it was joined back, its last work waited for. */
        for (int e = 1; e < gr->n; e++)
            TRY(dev(g, backend_stream_wait(g->be, gr->member[e]->join), err));
        g->key = -1;
        TRY(dev(g, backend_graph_end(g->be, key, true), err));
        /* A member's next eager work waits for this: it must come after
         * the graph's work on that member's device, which its own stream
         * does not order (the graph runs from the leader's stream). */
        if (next_eager)
            TRY(dev(g, backend_event_record(g->be, gr->after), err));
    }
    /* Barrier: the outcome.  The leader failed the group if it could not
     * end, instantiate or launch the graph: then no device goes on. */
    if (gr->sync(gr->ctx) != DDP_OK)
        return stopped(err);
    if (g->index != 0) {
        g->key = -1;
        TRY(dev(g, backend_graph_end(g->be, key, true), err));
        if (next_eager)
            TRY(dev(g, backend_stream_wait(g->be, gr->after), err));
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the start-up probe
//
// A step captured over NCCL holds its collectives; an NCCL that refuses (an
// older build, some configurations: ncclInvalidUsage on a capturing stream)
// would fail the run at its first graph step, after the warm-up.  So every
// member of the group asks first (comm_graph_probe: a small all-reduce
// captured, agreed on by all, launched and checked), and auto falls back to
// eager steps on every member, saying why once; on insists.  DP probes only
// under on (auto runs dp over NCCL eagerly), so only DDP falls back.

int graph_probe(const config_t *cfg, comm_t *comm, const char *place, const char *everyone,
                bool *on, char *refused, char *err)
{
    refused[0] = 0;
    if (!*on || !comm) /* no NCCL group: nothing to ask */
        return DDP_OK;
    bool insist = cfg->cuda_graph == CUDA_GRAPH_ON;
    comm_graph_probe_t p;
    int rc = comm_graph_probe(comm, insist, &p, err);
    if (rc != DDP_OK && insist && p.why[0]) /* this member's own refusal: the run's cause */
        return err_set(err, DDP_ERR_RUNTIME, "--cuda-graph on: %s", p.why);
    if (rc != DDP_OK || p.refused_by < 0)
        return rc;
    *on = false; /* auto: every member learned the same answer */
    if (p.refused_by != comm_rank(comm))
        return DDP_OK;
    err_set(refused, 0, "%s: %s", place, p.why);
    if (!cfg->quiet)
        fprintf(stderr, "ddpbench: note: --cuda-graph auto: %s; %s runs its steps eagerly\n",
                refused, everyone);
    return DDP_OK;
}
