/* common/train/graph.h: --cuda-graph for the three strategies (docs/gpu.md,
 * "CUDA graphs"), in one place.  Around a step the strategy calls graph_arm
 * (is it a graph step: eligible, and never the run's first), the stage calls
 * graph_open once the batch is staged (the copy stream stays outside; the key
 * is the step's parity, as are the slots and records whose pointers a graph
 * holds), then graph_close ends it (a failed step's capture is dropped);
 * graph_reset when the step's work changes on purpose (new buckets),
 * graph_abandon before a teardown waits for the device.  A graph step queues
 * the same work every time (step_meter_same_work).  A communicator a graph
 * holds defers its abort until graph_abandon drops the graph (backend.h), so
 * a strategy aborts its group whenever it must.  DP's devices share one graph
 * led by device 0 (graph.c says why). */
#ifndef DDPBENCH_TRAIN_GRAPH_H
#define DDPBENCH_TRAIN_GRAPH_H

#include <stdbool.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/device/backend.h"
#include "common/measure/step_meter.h"

typedef struct graph_group graph_group_t;

typedef struct {
    backend_t *be;
    step_meter_t *meter;
    const char *place;     /* how its failures are named ("device 0"; NULL: not here) */
    bool on;               /* eligible steps are graphs */
    long first;            /* the run's first step (eager) */
    bool armed;            /* the open step is a graph step */
    int key;               /* the open graph's key, -1: none */
    graph_group_t *group;  /* DP: the group, NULL alone */
    int index;             /* its place in the group (0: the leader) */
    backend_event_t *join; /* a member: its last record in the graph step */
} graph_t;

/* DP: every device's graph_t and the group's barrier (sync returns DDP_OK,
 * or a failure once another member failed). */
struct graph_group {
    int n;
    graph_t *member[MAX_DEVICES];
    backend_event_t *fork, *after; /* the leader's: members join its capture; eager work after it */
    int (*sync)(void *ctx);
    void *ctx;
};

/* on: config_graphs_on for this mode; first: the run's first step.  In a
 * group, each member on its own thread after the group's n, sync and ctx
 * are set; the events it needs are made here. */
int graph_init(graph_t *g, bool on, backend_t *be, step_meter_t *m, const char *place, long first,
               graph_group_t *group, int index, char *err);
void graph_free(graph_t *g);

/* Before step g; returns whether it is a graph step. */
bool graph_arm(graph_t *g, long step, bool eligible);
int graph_open(graph_t *g);
int graph_close(graph_t *g, int rc, char *err);
void graph_reset(graph_t *g);
/* Leave a graph step a failure left open, wait for the graphs launched (a
 * group's leader: they run every member's work) and drop them.  In a group
 * every member calls it once every member has stopped queuing, and none
 * frees what the graphs touch before the leader is through it. */
void graph_abandon(graph_t *g);

/* A group's step (after graph_arm said yes): the leader begins the graph
 * once it has staged its batch and records the fork; a barrier; each member
 * follows.  After the step's last barrier, graph_join: the members' joins,
 * the leader's end of the graph, the outcome shared by a barrier, and when
 * the next step runs eagerly, every member's stream ordered after the graph. */
int graph_fork(graph_t *g, long step, char *err);
int graph_join(graph_t *g, bool next_eager, char *err);

/* Before anything trains with graphs over NCCL (comm; NULL: nothing to ask),
 * every member together: does NCCL capture its collectives (docs/gpu.md)?
 * One could not: under auto *on becomes false everywhere and the lowest such
 * member writes "<place>: <reason>" into refused (else "") and says it once,
 * naming who runs eagerly (everyone); under on it fails (DDP_ERR_RUNTIME). */
int graph_probe(const config_t *cfg, comm_t *comm, const char *place, const char *everyone,
                bool *on, char *refused, char *err);

#endif
