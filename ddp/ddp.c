/* ddp/ddp.c: the DistributedDataParallel strategy: one rank per device, started by the
 * launcher (launch.h), each training in rank.c; this file turns what they report into a
 * run_result_t on the process that reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/schedule.h"
#include "common/measure/step_meter.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"
#include "ddp/launch.h"
#include "ddp/shard.h"

/* --no-join: when a rank left the loop out of data, the others' timeout is its doing; say
 * which rank, when, and what fixes it (under mpirun from the schedule every rank shares). */
static void left_hint(const config_t *cfg, const ddp_area_t *a, int world, const schedule_t *sch,
                      bool mpi, char *err)
{
    for (int r = 0; r < world; r++) {
        long left_step = -1;
        if (!mpi && a->rank[r].left) {
            left_step = a->rank[r].left_step;
        } else if (mpi && !cfg->join && strstr(err, "timed out")) {
            for (long g = 0; g < sch->total_steps && left_step < 0; g++)
                if (!schedule_rank_active(sch, g, r))
                    left_step = g;
        }
        if (left_step < 0)
            continue;
        int most = 0;
        for (int q = 1; q < world; q++)
            if (schedule_rank_steps(sch, q) > schedule_rank_steps(sch, most))
                most = q;
        size_t n = strlen(err);
        snprintf(err + n, ERR_LEN - n,
                 "; rank %d ran out of data after step %ld (%ld samples: %ld steps an epoch, "
                 "rank %d has %ld) and left without --join: --join lets it shadow the others' "
                 "all-reduces, or give every rank equal shards (drop_last-style)",
                 r, left_step, cfg->rank_samples[r], schedule_rank_steps(sch, r), most,
                 schedule_rank_steps(sch, most));
        return;
    }
}

typedef struct {
    const dataset_t *data;
    const config_t *(*rank_config)(const config_t *cfg, int rank); /* NULL: every rank runs cfg */
} train_ctx_t;

static int train_rank(const config_t *cfg, const ddp_env_t *env, void *ctx)
{
    const train_ctx_t *t = ctx;
    if (t->rank_config) /* this rank's own configuration (ddp_shared.h) */
        cfg = t->rank_config(cfg, env->rank);
    return ddp_rank_run(cfg, t->data, env);
}

// ---------------------------------------------------------------------------
// the result

static int collect(const config_t *cfg, ddp_area_t *a, int world, schedule_t *sch,
                   const model_spec_t *spec, run_result_t *res, char *err)
{
    for (int r = 0; r < world; r++) {
        const ddp_rank_rec_t *rec = &a->rank[r];
        if (rec->state != RANK_DONE)
            return err_set(err, DDP_ERR_RUNTIME, "rank %d (device %d) exited without its results",
                           r, cfg->gpus[r]);
        /* Every rank applied the same averaged gradients to the same start:
         * their parameters must be bit-identical, or the run is not DDP. */
        if (rec->checksum.bits != a->rank[0].checksum.bits && !(cfg->watch & WATCH_REPLICAS))
            return err_set(err, DDP_ERR_RUNTIME,
                           "rank %d (device %d): its parameters drifted from rank 0's "
                           "(checksum %016llx vs %016llx)",
                           r, cfg->gpus[r], (unsigned long long)rec->checksum.bits,
                           (unsigned long long)a->rank[0].checksum.bits);
        res->dev[r] = rec->stats;
        if (rec->graph_refused[0] && !res->graph_refused[0]) /* the one rank that said it */
            snprintf(res->graph_refused, sizeof res->graph_refused, "%s", rec->graph_refused);
        /* --trace: the rank's recorder out of the segment, which goes next */
        const trace_rec_t *tr = ddp_area_trace(a, r);
        if (tr && !(res->trace[r] = trace_rec_clone(tr)))
            return err_set(err, DDP_ERR_RUNTIME, "out of memory for the trace");
    }
    /* Every rank started at the step rank 0 recorded (--resume: the checkpoint's). */
    sch->start_step = a->start_step;
    trainer_begin(res, cfg, sch);
    res->story = a->story;
    res->replicas = a->replicas;
    res->ntuned = a->ntuned;
    memcpy(res->tuned_mb, a->tuned_mb, sizeof res->tuned_mb);
    memcpy(res->tuned_s, a->tuned_s, sizeof res->tuned_s);
    res->bucket_mb_chosen = a->bucket_mb_chosen;
    /* The run's step times are the slowest rank's in all, not each step's slowest: a rank
     * held up in step g makes the others wait in step g+1, and the per-step maximum counted
     * that twice (up to 20% over the wall clock).  The others' difference is PH_SKEW. */
    int slow = 0;
    long samples = 0;
    for (int r = 0; r < world; r++) {
        samples += a->rank[r].times.timed_samples;
        if (a->rank[r].times.timed_s > a->rank[slow].times.timed_s)
            slow = r;
    }
    res->times = a->rank[slow].times;
    res->times.timed_samples = samples;
    res->nbuckets = a->rank[0].nbuckets;
    for (int i = 0; i < res->nbuckets; i++) {
        res->bucket_bytes[i] = a->rank[0].bucket_bytes[i];
        long n0 = a->rank[0].times.n;
        res->bucket_s[i] = n0 > 0 ? a->rank[0].bucket_s[i] / (double)n0 : 0.0;
    }
    res->total_s = a->rank[0].total_s;
    res->final_loss = a->rank[0].final_loss;
    for (long i = 0; i < a->rank[0].log.n; i++) {
        loss_point_t p = ddp_area_log(a)[i];
        if (loss_log_add(&res->log, p.step, p.epoch, p.loss) != DDP_OK)
            return err_set(err, DDP_ERR_RUNTIME, "out of memory for the loss log");
    }
    float *params = malloc(spec->nparams * sizeof(float));
    if (!params)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the final parameters (%zu bytes)",
                       spec->nparams * sizeof(float));
    memcpy(params, ddp_area_params(a), spec->nparams * sizeof(float));
    trainer_end(res, spec->nparams, params);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the strategy

static int ddp_run_each(const config_t *cfg, const dataset_t *data,
                        const config_t *(*rank_config)(const config_t *cfg, int rank),
                        run_result_t *res, char *err)
{
    result_init(res);
    res->mode = MODE_DDP;
    res->zero = cfg->zero;
    res->backend = cfg->backend;
    res->comm = comm_resolve(cfg->comm, cfg->backend);
    int world = cfg->ngpus;
    res->ndev = world;
    if (world < 1 || world > MAX_DEVICES)
        return err_set(err, DDP_ERR_INPUT, "--gpus: ddp runs 1..%d ranks, got %d", MAX_DEVICES,
                       world);
    if (res->comm == COMM_NCCL && !comm_nccl_available())
        return err_set(err, DDP_ERR_INPUT,
                       "--comm nccl: this ddpbench was built without NCCL (use --comm shm)");
    model_spec_t spec;
    TRY(config_model_spec(cfg, &spec, err));
    /* The global schedule sizes the result area (every rank runs its steps). */
    schedule_t sch;
    TRY(schedule_init(&sch, cfg, data, 1, 0, err));
    long max_log = sch.total_steps < LOSS_LOG_MAX ? sch.total_steps : LOSS_LOG_MAX;
    /* --trace and --report: a recorder per rank, with room for at most 2 buckets a layer */
    bool record = cfg->trace_path[0] || cfg->report_path[0]; /* --report draws a step of them */
    uint32_t trace_cap = record ? trace_capacity(cfg->accum, 2 * spec.nlayers + 2) : 0;
    size_t bytes = ddp_area_layout(NULL, world, max_log, spec.nparams, trace_cap);
    ddp_group_t *g;
    int rc = ddp_group_open(&g, cfg, bytes, err);
    if (rc != DDP_OK) {
        schedule_free(&sch);
        return rc;
    }
    ddp_area_t *area = ddp_group_area(g);
    ddp_area_layout(area, world, max_log, spec.nparams, trace_cap);

    train_ctx_t ctx = {data, rank_config};
    rc = ddp_group_run(g, train_rank, &ctx, err);
    if (rc != DDP_OK)
        left_hint(cfg, area, world, &sch, ddp_group_mpi(g), err);
    else if (ddp_group_reports(g)) /* under mpirun, rank 0: it holds every record */
        rc = collect(cfg, area, world, &sch, &spec, res, err);
    ddp_group_close(g);
    schedule_free(&sch);
    return rc;
}

static int ddp_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err)
{
    return ddp_run_each(cfg, data, NULL, res, err);
}

/* What a rank holds at its --zero stage (shard.h). */
static int ddp_mem(const model_spec_t *s, const config_t *c, int devices, int device,
                   strategy_mem_t *out, char *err)
{
    (void)device;
    shard_mem_t m;
    TRY(shard_mem(s, c, devices, &m, err));
    *out = (strategy_mem_t){m.params, m.grads, m.optim};
    return DDP_OK;
}

/* Its buckets' sizes (reducer.h). */
static int ddp_buckets(const model_spec_t *s, const config_t *c, double *bytes, int max, int *n,
                       char *err)
{
    reducer_t red;
    TRY(reducer_init(&red, NULL, NULL, s, NULL, c->first_bucket_mb, c->bucket_mb, c->overlap,
                     BUCKETS_CAPPED, err));
    for (*n = 0; *n < red.nb && *n < max; (*n)++)
        bytes[*n] = (double)red.b[*n].count * sizeof(float);
    reducer_free(&red);
    return DDP_OK;
}

const strategy_t ddp_strategy = {.run = ddp_run, .mem = ddp_mem, .collectives = ddp_buckets,
                                 .comm_bench = ddp_comm_bench, .run_each = ddp_run_each};
