/* strategies/ddp/graph_probe.h: before a DDP rank trains with CUDA graphs over
 * NCCL, whether NCCL captures its collectives at all (comm.h's
 * comm_graph_probe, every rank together); what --cuda-graph makes of the
 * answer is common/train/graph_probe.h's policy, shared with DP. */
#ifndef DDPBENCH_GRAPH_PROBE_H
#define DDPBENCH_GRAPH_PROBE_H

#include <stdbool.h>

#include "comm/comm.h"
#include "config/config.h"

/* Every rank calls it after joining its group, before anything trains, when
 * its steps would be graphs (*graphs true) and its comm is NCCL.  All ranks
 * captured: *graphs stays true.  A rank could not: under --cuda-graph auto
 * *graphs becomes false on every rank (the same steps everywhere), and the
 * lowest such rank writes its reason into refused (ERR_LEN: "rank R (device
 * D): ...", for --json) and says it once on stderr; under on that rank's
 * reason ends the run (DDP_ERR_RUNTIME, err).  Other failures: err. */
int ddp_graph_probe(const config_t *cfg, comm_t *comm, bool *graphs, char *refused, char *err);

#endif
