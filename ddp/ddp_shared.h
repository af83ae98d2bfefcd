/* ddp/ddp_shared.h: what DDP ranks hand back to their supervisor, laid out in
 * the shared segment's extra area (fixed records, then the arrays):
 *
 *   ddp_area_t        sizes and offsets, rank 0's start step, --explain story
 *                     and --bucket-mb auto's trials and choice
 *   ddp_rank_rec_t    one per rank: state, error, phase times, its step times
 *                     (a fixed size, whatever --steps: measure/result.h),
 *                     memory, checksum
 *   loss_point_t log[max_log]        rank 0's loss log (the global mean loss;
 *                                    at most LOSS_LOG_MAX points)
 *   float params[nparams]            rank 0's final parameters
 *   trace_rec_t trace[world]         --trace only: each rank's recorder, in
 *                                    slots of trace_stride bytes (trace.h)
 *
 * A rank writes only its own record and recorder (rank 0 also the start
 * step, the story and the autotune fields) before it exits; the supervisor reads them after
 * reaping every rank, so no synchronisation is needed beyond process exit
 * (waitpid orders the child's writes before the parent's reads).  The
 * pointer in a record (log.pt)
 * points into the area: it is mapped before the fork, at the same address
 * in every process.  Under mpirun (launch_mpi.c) each process has an area
 * of its own; rank 0 gathers the others' records and slots into its own
 * (rank 0's log and parameters are already there), so the same reading
 * works on it.  The slots after off_trace hold the recorders, or another
 * body's fixed per-rank blocks (--mode comm's measurements). */
#ifndef DDPBENCH_DDP_SHARED_H
#define DDPBENCH_DDP_SHARED_H

#include <stddef.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "common/measure/result.h"

enum { RANK_STARTING = 0, RANK_RUNNING, RANK_DONE, RANK_FAILED };

typedef struct {
    int state;
    int rc;                 /* the rank's status when it failed */
    char msg[ERR_LEN];      /* and why */
    device_stats_t stats;
    param_checksum_t checksum; /* of the rank's final parameters */
    step_times_t times;     /* this rank's timed steps (bounded) */
    loss_log_t log;         /* rank 0: the loss log (pt: in this area) */
    double total_s, final_loss;
    bool left;              /* --no-join: it ran out of data and left the loop ... */
    long left_step;         /* ... before this step (0-based) */
    /* its buckets' all-reduces in the timed steps: bytes, seconds in all */
    int nbuckets;
    double bucket_bytes[STORY_MAX_BUCKETS], bucket_s[STORY_MAX_BUCKETS];
    /* --cuda-graph auto: why this rank's NCCL could not capture, when it was
     * the lowest such rank and every rank ran eagerly (comm.h's comm_graph_probe); "" */
    char graph_refused[ERR_LEN];
} ddp_rank_rec_t;

typedef struct {
    int world;
    long max_log;
    size_t nparams;
    uint32_t trace_cap;     /* events per recorder; 0: no --trace */
    size_t off_log, off_params, off_trace; /* bytes from the area's start */
    size_t trace_stride;    /* bytes per recorder slot */
    long start_step;        /* rank 0: the first step run (> 0 after --resume) */
    int ntuned;             /* rank 0: --bucket-mb auto's caps and summed step times */
    double tuned_mb[RESULT_TUNE_MAX], tuned_s[RESULT_TUNE_MAX], bucket_mb_chosen;
    step_story_t story;     /* rank 0: --explain's told step */
    replica_rec_t replicas; /* rank 0: --check-replicas' checks */
    /* The supervisor's stop request (fork launcher): the signal it was asked
     * to stop with, 0 none.  Written by the supervisor, read by every rank
     * at each step's end (interrupt_follow), both with atomic accesses: the
     * one field of the area shared while the ranks run. */
    int stop_sig;
    ddp_rank_rec_t rank[MAX_DEVICES];
} ddp_area_t;

/* Bytes of the area for these sizes; fills the offsets when a is not NULL
 * (the recorders are then set up too: trace_cap events each, 0 for none). */
size_t ddp_area_layout(ddp_area_t *a, int world, long max_log, size_t nparams,
                       uint32_t trace_cap);
static inline loss_point_t *ddp_area_log(ddp_area_t *a)
{
    return (loss_point_t *)((char *)a + a->off_log);
}
static inline float *ddp_area_params(ddp_area_t *a)
{
    return (float *)((char *)a + a->off_params);
}
/* Rank `rank`'s recorder, NULL without --trace. */
static inline trace_rec_t *ddp_area_trace(ddp_area_t *a, int rank)
{
    if (a->trace_cap == 0)
        return NULL;
    return (trace_rec_t *)((char *)a + a->off_trace + (size_t)rank * a->trace_stride);
}

/* The body of one DDP rank (launch.h's env: its rank, the area, the
 * segment or MPI's exchange): train, fill its record.  Returns its status
 * (a forked rank's exit status). */
struct ddp_env;
int ddp_rank_run(const config_t *cfg, const dataset_t *data, const struct ddp_env *env);

#endif
