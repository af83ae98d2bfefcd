/* ddp/ddp_shared.h: what DDP ranks hand back to the reporting process, in the group's area
 * (launch.h): the ddp_area_t, then rank 0's loss log, its final parameters and the slots at
 * off_trace (--trace recorders, or --mode comm's per-rank blocks).  Each rank writes only
 * its own record and slot (rank 0 also the area's rank-0 fields); the supervisor reads them
 * after reaping every rank (waitpid orders the writes before the reads), and log.pt points
 * into the area, mapped before the fork.  Under mpirun rank 0 gathers the others' into its
 * own area (launch_mpi.c). */
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
    /* --cuda-graph auto: why this rank's NCCL could not capture (the lowest such rank) */
    char graph_refused[ERR_LEN];
} ddp_rank_rec_t;

typedef struct {
    long max_log;
    uint32_t trace_cap;     /* events per recorder; 0: no --trace */
    size_t off_log, off_params, off_trace; /* bytes from the area's start */
    size_t trace_stride;    /* bytes per recorder slot */
    long start_step;        /* rank 0: the first step run (> 0 after --resume) */
    int ntuned;             /* rank 0: --bucket-mb auto's caps and summed step times */
    double tuned_mb[RESULT_TUNE_MAX], tuned_s[RESULT_TUNE_MAX], bucket_mb_chosen;
    step_story_t story;     /* rank 0: --explain's told step */
    replica_rec_t replicas; /* rank 0: --check-replicas' checks */
    /* The fork supervisor's stop request (its signal, 0 none): written by it, read by every
     * rank at each step's end, with atomic accesses (the one field shared while ranks run). */
    int stop_sig;
    ddp_rank_rec_t rank[MAX_DEVICES];
} ddp_area_t;

/* Bytes of the area for these sizes; with a, fills its offsets and sets up the recorders. */
size_t ddp_area_layout(ddp_area_t *a, int world, long max_log, size_t nparams,
                       uint32_t trace_cap);
static inline loss_point_t *ddp_area_log(ddp_area_t *a) { return (void *)((char *)a + a->off_log); }
static inline float *ddp_area_params(ddp_area_t *a) { return (void *)((char *)a + a->off_params); }
/* Rank `rank`'s recorder, NULL without --trace. */
static inline trace_rec_t *ddp_area_trace(ddp_area_t *a, int rank)
{
    if (a->trace_cap == 0)
        return NULL;
    return (trace_rec_t *)((char *)a + a->off_trace + (size_t)rank * a->trace_stride);
}

/* The body of one DDP rank (launch.h's env): train, fill its record; returns its status. */
struct ddp_env;
int ddp_rank_run(const config_t *cfg, const dataset_t *data, const struct ddp_env *env);

#endif
