/* ddp/launch.h: how DDP's ranks come to be, the seam between the launchers.
 *
 *   fork (ddp.c)         this process is the supervisor: it makes the shared
 *                        segment, forks one rank per device of --gpus and
 *                        watches them; the ranks' records come back through
 *                        the segment.  One host.
 *   mpi (launch_mpi.c)   mpirun started one ddpbench per rank, on one host or
 *                        many: each process runs its own rank (device
 *                        --gpus[local rank]); rank 0 gathers the others'
 *                        records over MPI and reports.  Built with MPI.
 *
 * The strategies that run on ranks (ddp.c's training, commbench.c) are
 * written once against a group: open it with room for their result area,
 * run a body on every rank, and, on the process that reports (fork: the
 * supervisor; mpi: rank 0), read every rank's record in the area.
 *
 * The program (bench/main.c) also asks the launcher, around everything it
 * does: ddp_launch_init first (under mpirun: MPI, and a watcher process per
 * rank, which turns a rank killed by a signal into exit 1 and a line naming
 * it), ddp_launch_agree once its input is checked (every rank's outcome
 * and configuration compared: a rank that failed, or was started with other
 * flags, data or binary, is named before anything runs), ddp_launch_reports
 * before it prints, and ddp_launch_end on the way out. */
#ifndef DDPBENCH_LAUNCH_H
#define DDPBENCH_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "ddp/ddp_shared.h"

// ---------------------------------------------------------------------------
// a group of ranks, for the strategies

/* What a rank's body is given. */
typedef struct ddp_env {
    int rank, world;
    ddp_area_t *area;          /* the result area: the body writes its own record and slot */
    comm_seg_t *seg;           /* fork: the segment (shm's collectives, NCCL's id, the abort
                                  flag); mpi: NULL */
    comm_exchange_fn exchange; /* mpi: how NCCL's id reaches the ranks (MPI_Bcast); fork: NULL */
    void *exchange_ctx;
} ddp_env_t;

/* A rank's work: its status is the rank's (fork: the child's exit status).
 * It fills area->rank[env->rank]'s state, rc and msg. */
typedef int (*ddp_body_fn)(const config_t *cfg, const ddp_env_t *env, void *ctx);

typedef struct ddp_group ddp_group_t;

/* A group of cfg->ngpus ranks (under mpirun: MPI's world) whose result area
 * has `bytes` bytes, zeroed and 64-byte aligned (it must start with a
 * ddp_area_t: ddp_area_layout). */
int ddp_group_open(ddp_group_t **g, const config_t *cfg, size_t bytes, char *err);
ddp_area_t *ddp_group_area(ddp_group_t *g);
/* Run body on every rank.  DDP_OK when every rank succeeded: then the
 * reporting process's area holds every rank's record and slot (the slots at
 * off_trace, trace_stride bytes each).  Otherwise one line in err naming the
 * rank and the cause (fork: the first; mpi: this process's rank, whose
 * failure ends the job: ddp_launch_end). */
int ddp_group_run(ddp_group_t *g, ddp_body_fn body, void *ctx, char *err);
/* True on the process that holds every rank's results after a run. */
bool ddp_group_reports(const ddp_group_t *g);
/* True when the ranks are mpirun's (no shared records beyond one's own). */
bool ddp_group_mpi(const ddp_group_t *g);
void ddp_group_close(ddp_group_t *g);

// ---------------------------------------------------------------------------
// the program's side

/* ddp_launch_init's status for the watcher: the process that started as
 * mpirun's rank and forked the rank itself; main returns *code at once. */
#define DDP_LAUNCH_WATCHER 100

/* Resolve --launcher: mpi when asked, or (auto) when the environment says
 * mpirun started this process (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE).
 * Under mpi, fork the watcher (the parent waits for the rank and returns
 * DDP_LAUNCH_WATCHER with *code: the rank's exit status, or 1 with a line
 * naming it when a signal killed it), initialise MPI in the child and fill
 * cfg's world: launcher, world_rank, world_size, local_rank.  Otherwise
 * launcher is fork.  DDP_ERR_INPUT when mpi is asked for but not built. */
int ddp_launch_init(config_t *cfg, int *code, char *err);

/* The start-up check, once every rank has checked its input.  rc and err:
 * this rank's outcome so far; data: its data set (NULL when not loaded).
 * fork: returns rc.  mpi: every rank's outcome, device, host and a
 * fingerprint of what must match (ddp/fingerprint.h: the settings, the
 * data, the binary) meet on rank 0, which judges for all; every rank
 * returns the verdict: DDP_OK (and cfg->gpus holds every rank's device), or
 * the first failure, or DDP_ERR_INPUT naming the rank and what differs
 * there.  err holds the line on rank 0, and is empty on the others (rank 0
 * prints for the group). */
int ddp_launch_agree(config_t *cfg, const dataset_t *data, int rc, char *err);

/* True on the process that prints results and writes output files: always
 * under fork, rank 0 under mpi. */
bool ddp_launch_reports(const config_t *cfg);

/* "mpirun: 3 ranks on 2 hosts (a: ranks 0-1, b: rank 2)" for the banner,
 * "" under fork. */
void ddp_launch_describe(const config_t *cfg, char *buf, size_t len);

/* The way out: main returns what this returns.  Under mpi, code 0 (or a
 * failure the start-up check agreed on) finalizes MPI; any other failure
 * ends the whole job (MPI_Abort with code), as the rank cannot tell the
 * others. */
int ddp_launch_end(const config_t *cfg, int code);

#endif
