/* common/train/graph_probe.h: before a strategy trains with CUDA graphs over
 * NCCL, whether NCCL captures its collectives at all (comm.h's
 * comm_graph_probe, every member of the group together), and what
 * --cuda-graph makes of the answer (graph_probe.c): DDP's ranks (processes)
 * and DP's device threads (ranks of one in-process group) alike. */
#ifndef DDPBENCH_TRAIN_GRAPH_PROBE_H
#define DDPBENCH_TRAIN_GRAPH_PROBE_H

#include <stdbool.h>

#include "common/comm/comm.h"
#include "common/config/config.h"

/* Every member of comm's group calls it before anything trains, when its
 * steps would be graphs (*graphs true) over NCCL.  All captured: *graphs
 * stays true.  A member could not: under --cuda-graph auto *graphs becomes
 * false on every member (the same steps everywhere), and the lowest such
 * member writes "<place>: <its reason>" into refused (ERR_LEN, for --json)
 * and says it once on stderr, naming who runs eagerly (everyone: "every
 * rank"); under on that member fails with "--cuda-graph on: <its reason>"
 * (DDP_ERR_RUNTIME, err; the caller names it), before the agreement, so
 * the others' probe fails too (their caller aborts the group, or its
 * process ends).  Other failures: err.  refused is "" unless written. */
int trainer_graph_probe(const config_t *cfg, comm_t *comm, const char *place,
                        const char *everyone, bool *graphs, char *refused, char *err);

#endif
