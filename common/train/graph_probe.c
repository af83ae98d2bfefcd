/* common/train/graph_probe.c: --cuda-graph against what NCCL allows.  A step
 * captured over NCCL holds its collectives; an NCCL that refuses (an older
 * build, some configurations: ncclInvalidUsage on a capturing stream) would
 * fail the run at its first graph step, after the warm-up.  So every member
 * of the group asks first (comm_graph_probe: a small all-reduce captured,
 * agreed on by all, launched and checked), and auto falls back to eager
 * steps on every member, saying why once; on insists.  DDP's ranks and DP's
 * device threads share this policy (graph_probe.h); DP probes only under on
 * (auto runs dp over NCCL eagerly), so only DDP falls back. */
#include <stdio.h>

#include "common/train/graph_probe.h"

int trainer_graph_probe(const config_t *cfg, comm_t *comm, const char *place,
                        const char *everyone, bool *graphs, char *refused, char *err)
{
    refused[0] = 0;
    if (!*graphs)
        return DDP_OK;
    bool insist = cfg->cuda_graph == CUDA_GRAPH_ON;
    comm_graph_probe_t p;
    int rc = comm_graph_probe(comm, insist, &p, err);
    if (rc != DDP_OK && insist && p.why[0]) /* this member's own refusal: the run's cause */
        return err_set(err, DDP_ERR_RUNTIME, "--cuda-graph on: %s", p.why);
    if (rc != DDP_OK || p.refused_by < 0)
        return rc;
    *graphs = false; /* auto: every member learned the same answer */
    if (p.refused_by != comm_rank(comm))
        return DDP_OK;
    err_set(refused, 0, "%s: %s", place, p.why);
    if (!cfg->quiet)
        fprintf(stderr, "ddpbench: note: --cuda-graph auto: %s; %s runs its steps eagerly\n",
                refused, everyone);
    return DDP_OK;
}
