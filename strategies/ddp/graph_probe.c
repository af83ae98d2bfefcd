/* strategies/ddp/graph_probe.c: --cuda-graph against what NCCL allows.  A DDP
 * rank over NCCL captures its buckets' all-reduces with its step; an NCCL
 * that refuses (an older build, some configurations: ncclInvalidUsage on a
 * capturing stream) would fail the run at its first graph step, after the
 * warm-up.  So every rank asks first (comm_graph_probe: a small all-reduce
 * captured, agreed on by all, launched and checked), and auto falls back to
 * eager steps on every rank, saying why once; on insists. */
#include <stdio.h>

#include "ddp/graph_probe.h"

int ddp_graph_probe(const config_t *cfg, comm_t *comm, bool *graphs, char *refused, char *err)
{
    refused[0] = 0;
    if (!*graphs || comm_resolve(cfg->comm, cfg->backend) != COMM_NCCL)
        return DDP_OK;
    int rank = comm_rank(comm), dev = cfg->gpus[rank];
    bool insist = cfg->cuda_graph == CUDA_GRAPH_ON;
    comm_graph_probe_t p;
    int rc = comm_graph_probe(comm, insist, &p, err);
    if (rc != DDP_OK && insist && p.why[0]) /* this rank's own refusal: the run's cause */
        return err_set(err, DDP_ERR_RUNTIME, "--cuda-graph on: %s", p.why);
    if (rc != DDP_OK || p.refused_by < 0)
        return rc;
    *graphs = false; /* auto: every rank learned the same answer */
    if (p.refused_by != rank)
        return DDP_OK;
    err_set(refused, 0, "rank %d (device %d): %s", rank, dev, p.why);
    if (!cfg->quiet)
        fprintf(stderr, "ddpbench: note: --cuda-graph auto: %s; every rank runs its steps "
                        "eagerly\n",
                refused);
    return DDP_OK;
}
