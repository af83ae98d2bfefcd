/* ddp/launch.h: how DDP's ranks come to be, the seam between the launchers: fork
 * (launch_fork.c: this process supervises one forked rank per device, one host) and mpi
 * (launch_mpi.c: mpirun started each rank; rank 0 gathers the records).  What runs on ranks
 * is written once against a group: open it with room for its result area, run a body on
 * every rank, and read every rank's record on the process that reports. */
#ifndef DDPBENCH_LAUNCH_H
#define DDPBENCH_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/measure/collperf.h"
#include "ddp/ddp_shared.h"

/* What a rank's body is given. */
typedef struct ddp_env {
    int rank, world;
    ddp_area_t *area;          /* the result area: the body writes its own record and slot */
    comm_seg_t *seg;           /* fork: the segment (shm, NCCL's id, the abort flag); mpi: NULL */
    comm_exchange_fn exchange; /* mpi: how NCCL's id reaches the ranks (MPI_Bcast); fork: NULL */
} ddp_env_t;

/* A rank's work, its status the rank's; it fills area->rank[env->rank]'s state, rc, msg. */
typedef int (*ddp_body_fn)(const config_t *cfg, const ddp_env_t *env, void *ctx);

/* A body's end: its record DONE, or FAILED with rc and err, the group aborted (comm, or the
 * segment before comm exists). */
void ddp_rank_end(const ddp_env_t *env, comm_t *comm, int rc, const char *err);

typedef struct ddp_group ddp_group_t;

/* A group of cfg->ngpus ranks (mpirun: MPI's world) whose result area has `bytes` bytes,
 * zeroed and 64-byte aligned (a ddp_area_t first: ddp_area_layout). */
int ddp_group_open(ddp_group_t **g, const config_t *cfg, size_t bytes, char *err);
ddp_area_t *ddp_group_area(ddp_group_t *g);
/* Run body on every rank.  DDP_OK: the reporting process's area holds every rank's record
 * and slot.  Otherwise one line in err naming the rank and the cause (fork: the first;
 * mpi: this process's rank, whose failure ends the job). */
int ddp_group_run(ddp_group_t *g, ddp_body_fn body, void *ctx, char *err);
/* True on the process that holds every rank's results after a run. */
bool ddp_group_reports(const ddp_group_t *g);
/* True when the ranks are mpirun's (no shared records beyond one's own). */
bool ddp_group_mpi(const ddp_group_t *g);
void ddp_group_close(ddp_group_t *g);

/* The collectives alone on a group's ranks (commbench.c): ddp_strategy's comm_bench. */
int ddp_comm_bench(const config_t *cfg, collperf_t *out, char *err);

#endif
