/* strategies/ddp/graph_probe.c: a DDP rank's start-up probe of NCCL's capture
 * (the policy is common/train/graph_probe.c's, shared with DP): over NCCL
 * only, each rank named "rank R (device D)". */
#include <stdio.h>

#include "ddp/graph_probe.h"
#include "train/graph_probe.h"

int ddp_graph_probe(const config_t *cfg, comm_t *comm, bool *graphs, char *refused, char *err)
{
    refused[0] = 0;
    if (!*graphs || comm_resolve(cfg->comm, cfg->backend) != COMM_NCCL)
        return DDP_OK;
    int rank = comm_rank(comm);
    char place[64];
    snprintf(place, sizeof place, "rank %d (device %d)", rank, cfg->gpus[rank]);
    return trainer_graph_probe(cfg, comm, place, "every rank", graphs, refused, err);
}
