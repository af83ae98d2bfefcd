/* strategies/ddp/rank.c: one DDP rank, in its own process (forked, or started by
 * mpirun): its device, its communicator, its shard of the data
 * (DistributedSampler), a full replica and optimizer, and the gradients
 * averaged over ranks in buckets while backward runs.  What it measured goes
 * back to the supervisor through the shared segment, or under mpirun to rank
 * 0 by MPI (ddp_shared.h, launch.h).  On a GPU the host only queues a step:
 * the buckets' waits are the GPU's (comm.h), the loss is fetched without
 * waiting, and the step meter's wait for the previous step is the step's one
 * host synchronisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "data/schedule.h"
#include "ddp/autotune.h"
#include "ddp/ddp_shared.h"
#include "ddp/fingerprint.h"
#include "ddp/launch.h"
#include "ddp/reducer.h"
#include "ddp/zero1.h"
#include "base/interrupt.h"
#include "io/checkpoint.h"
#include "measure/progress.h"
#include "measure/step_meter.h"
#include "nn/optim.h"
#include "train/stage.h"
#include "train/trainer.h"

size_t ddp_area_layout(ddp_area_t *a, int world, long max_log, size_t nparams,
                       uint32_t trace_cap)
{
    size_t off = (sizeof(ddp_area_t) + 63) & ~(size_t)63;
    size_t log = off;
    off += (size_t)max_log * sizeof(loss_point_t);
    off = (off + 63) & ~(size_t)63;
    size_t params = off;
    off += nparams * sizeof(float);
    off = (off + 63) & ~(size_t)63;
    size_t trace = off;
    size_t stride = trace_cap ? (trace_rec_bytes(trace_cap) + 63) & ~(size_t)63 : 0;
    off += (size_t)world * stride;
    if (a) {
        a->world = world;
        a->max_log = max_log;
        a->nparams = nparams;
        a->trace_cap = trace_cap;
        a->off_log = log;
        a->off_params = params;
        a->off_trace = trace;
        a->trace_stride = stride;
        for (int r = 0; r < world && trace_cap; r++)
            trace_rec_init(ddp_area_trace(a, r), trace_cap, r);
    }
    return off;
}

// ---------------------------------------------------------------------------
// the rank's state

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    const ddp_env_t *env; /* the launcher's: the segment, or MPI's exchange */
    int rank, world;
    ddp_area_t *area;
    ddp_rank_rec_t *rec;
    model_spec_t spec;
    backend_t *be;
    comm_t *comm;
    schedule_t sch;
    replica_t rep;
    optim_t opt;        /* --zero1: its state covers this rank's shard alone */
    reducer_t red;
    zero1_t z;          /* --zero1: the shard it steps */
    stager_t stg;       /* batch staging */
    float *host_params; /* rank 0's initial parameters (every rank's with --resume) */
    float *lossbuf;     /* device [3]: the step's loss sum, rows and rank 0's progress
                           decision, all-reduced (see rank_step) */
    float *loss_host;   /* pinned [2][3]: the rows and decision sent up, by step parity */
    long cur_g;         /* the step being queued */
    ckpt_run_t ck;      /* --resume (every rank) and --checkpoint (rank 0 writes) */
    trace_rec_t *tr;    /* --trace: this rank's recorder in the segment, or NULL */
    progress_t prog;    /* rank 0's progress line (off on the other ranks) */
    long progress_at;   /* the next step whose loss the progress line gets, -1 none */
    step_meter_t meter;
    double compute_cpu_s; /* --slow-rank on the CPU: the CPU seconds of the last step's
                             own forward, loss and backward (straggle_spin's unit) */
    autotune_t tune;    /* --bucket-mb auto */
    long tuned_g;       /* the last step whose time it was given (-1: none) */
    float *tunebuf;     /* device [AUTOTUNE_MAX]: its all-reduce */
    char err[ERR_LEN];
} rank_t;

/* A call on the rank's device or communicator: a failure keeps their own
 * message (the supervisor names the rank and the device). */
static int dev(rank_t *k, int rc) { return backend_check(k->be, rc, NULL, k->err); }
static int coll(rank_t *k, int rc) { return comm_check(k->comm, rc, NULL, k->err); }

static void rank_resolved(void *ctx, step_meter_t *m, step_rec_t *r);

// ---------------------------------------------------------------------------
// setup: device, communicator, shard, replica, optimizer, initial parameters

static int rank_setup(rank_t *k)
{
    const config_t *cfg = k->cfg;
    TRY(config_model_spec(cfg, &k->spec, k->err));
    /* The device is created here, after fork: CUDA does not survive fork. */
    TRY(backend_create(&k->be, cfg->backend, cfg->gpus[k->rank], 1, k->err));
    if (cfg->tf32)
        TRY(dev(k, backend_set_tf32(k->be, true)));
    comm_args_t ca = {cfg->comm, k->world, k->rank, k->be, k->env->seg, cfg->timeout_s, 0.0,
                      k->env->exchange, k->env->exchange_ctx};
    TRY(comm_create(&k->comm, &ca, k->err));
    /* Every rank on the same job before anything trains (fingerprint.h);
     * under mpirun the launcher compared the same fingerprints before
     * anything ran, each rank's own parse, data and binary. */
    if (cfg->launcher != LAUNCHER_MPI) {
        static fingerprint_t fp; /* 3 KiB: off the stack */
        fingerprint_make(&fp, cfg, k->data);
        TRY(ddp_fingerprint_check(k->comm, k->be, &fp, cfg->gpus, k->err));
    }
    TRY(schedule_init(&k->sch, cfg, k->data, k->world, k->rank, k->err));
    /* this rank's part of a micro-batch: ceil((B - rank) / world) rows (at
     * least 1 row of room: a rank past a small batch's end reads none) */
    int local_batch = (cfg->batch - k->rank + k->world - 1) / k->world;
    if (local_batch < 1)
        local_batch = 1;
    TRY(replica_init(&k->rep, k->be, &k->spec, local_batch, k->data->tgt_cols, k->err));
    TRY(reducer_init(&k->red, k->comm, &k->meter, &k->spec, k->rep.grads, cfg->first_bucket_mb,
                     cfg->bucket_mb, cfg->overlap, k->err));
    /* Shared memory (or MPI) on host buffers: what backward leaves (the last
     * bucket) runs on this thread; a hand-off to the comm thread would cost
     * two wake-ups and overlap nothing.  NCCL has no hand-off: launch from the
     * hook, so the GPU starts it as soon as backward's kernels are done. */
    comm_kind_t kind = comm_resolve(cfg->comm, cfg->backend);
    k->red.run_rest = (kind == COMM_SHM || kind == COMM_MPI) && backend_host_visible(k->be);
    if (cfg->zero1) { /* the buckets are reduce-scattered; the state is this rank's shard */
        k->red.shard_world = k->world;
        k->red.shard_rank = k->rank;
    }
    size_t state = cfg->zero1 ? zero1_state_floats(&k->red, k->world, k->rank) : k->spec.nparams;
    TRY(optim_init(&k->opt, k->be, &cfg->optim, state, k->err));
    if (cfg->zero1)
        TRY(zero1_init(&k->z, &k->red, &k->opt, k->world, k->rank, k->red.run_rest, k->err));
    TRY(ckpt_run_init(&k->ck, cfg, &k->spec, &k->opt, 0, k->err));
    if (cfg->bucket_auto) {
        autotune_init(&k->tune, &k->spec, cfg->first_bucket_mb, k->sch.start_step,
                      schedule_warmup(&k->sch));
        if (!(k->tunebuf = backend_alloc_for(k->be, AUTOTUNE_MAX * sizeof(float), MEM_COMM)))
            return err_set(k->err, DDP_ERR_RUNTIME, "out of device memory");
    }
    k->lossbuf = backend_alloc_for(k->be, 3 * sizeof(float), MEM_COMM);
    k->loss_host = backend_alloc_host(k->be, 6 * sizeof(float));
    if (!k->lossbuf || !k->loss_host)
        return err_set(k->err, DDP_ERR_RUNTIME, "out of memory for the loss");
    TRY(stager_init(&k->stg, k->be, k->rep.x, k->rep.y, local_batch, cfg->accum, k->data, k->err));
    /* Rank 0's initial parameters reach everyone by broadcast, as DDP's
     * constructor does (they are equal anyway when every rank uses --seed). */
    if (k->rank == 0 || cfg->resume_path[0]) {
        k->host_params = malloc(k->spec.nparams * sizeof(float));
        if (!k->host_params)
            return err_set(k->err, DDP_ERR_RUNTIME, "out of memory for the parameters");
    }
    if (k->rank == 0)
        TRY(trainer_initial_params(cfg, &k->spec, k->host_params, k->err));
    /* --resume: every rank reads the same file, so each has the optimizer
     * state and step of the checkpoint (DDP keeps one per rank, identical)
     * and the same first step; the parameters still come by broadcast. */
    TRY(ckpt_run_resume(&k->ck, &k->sch, k->host_params, &k->opt, k->err));
    if (k->rank == 0) {
        k->area->start_step = k->sch.start_step;
        TRY(dev(k, backend_h2d(k->be, k->rep.params, k->host_params,
                               k->spec.nparams * sizeof(float))));
    }
    double t0 = now_s();
    TRY(coll(k, comm_broadcast(k->comm, k->rep.params, k->spec.nparams, 0)));
    TRY(dev(k, backend_sync(k->be)));
    if (k->rank == 0)
        k->area->story.move[MOVE_BROADCAST] =
            (move_stat_t){k->spec.nparams * sizeof(float), now_s() - t0, 1};
    /* Every rank fetches the loss of its first step: that all-reduce carries
     * rank 0's first decision about the progress line (see rank_step). */
    k->progress_at = k->sch.start_step;

    /* Every rank keeps its own phases and step times (the supervisor takes
     * the slowest rank's); rank 0 also the loss log, the progress line and
     * --explain's story.  All of it lives in the shared area. */
    ddp_rank_rec_t *rec = k->rec;
    if (k->rank == 0)
        rec->log = (loss_log_t){.pt = ddp_area_log(k->area), .cap = k->area->max_log,
                                .fixed = true};
    return step_meter_init(&k->meter,
                           &(step_meter_sinks_t){
                               .cfg = cfg,
                               .dev = &rec->stats,
                               .trace = k->tr,
                               .times = &rec->times,
                               .log = k->rank == 0 ? &rec->log : NULL,
                               .final_loss = &rec->final_loss,
                               .story = k->rank == 0 ? &k->area->story : NULL,
                               .progress = k->rank == 0 ? &k->prog : NULL,
                               .be = k->be,
                               .resolved = rank_resolved,
                               .ctx = k,
                           },
                           k->err);
}

/* New buckets with this cap.  Between steps, with every earlier step
 * reported (the meter resolved them), so no all-reduce of the old buckets is
 * still to be read. */
static int rebucket(rank_t *k, double mb)
{
    TRY(step_meter_finish(&k->meter, k->err));
    bool run_rest = k->red.run_rest;
    reducer_free(&k->red);
    TRY(reducer_init(&k->red, k->comm, &k->meter, &k->spec, k->rep.grads,
                     k->cfg->first_bucket_mb, mb, k->cfg->overlap, k->err));
    k->red.run_rest = run_rest;
    return DDP_OK;
}

/* --bucket-mb auto before step g: the candidate cap it tries, if any. */
static int rank_autotune_after(rank_t *k);

static int rank_autotune_before(rank_t *k, long g)
{
    if (!k->cfg->bucket_auto)
        return DDP_OK;
    /* The choice comes before the step after the last candidate.  On a
     * device that step's candidate reports only when the next step ends:
     * have it report now (a wait, in the warm-up), so every timed step runs
     * with the chosen cap. */
    if (autotune_due(&k->tune, g - 1) && k->tuned_g < g - 1) {
        TRY(step_meter_finish(&k->meter, k->err));
        TRY(rank_autotune_after(k));
    }
    double mb = autotune_before(&k->tune, g);
    return mb > 0.0 ? rebucket(k, mb) : DDP_OK;
}

/* --bucket-mb auto after a step ended: the time of each step as the meter
 * reports it (at once on the CPU, a step later on a GPU) and, after the last
 * candidate's, the choice, the same on every rank. */
static int rank_autotune_after(rank_t *k)
{
    long g;
    double dt;
    if (!k->cfg->bucket_auto || !step_meter_resolved(&k->meter, &g, &dt) || g == k->tuned_g)
        return DDP_OK;
    k->tuned_g = g;
    autotune_after(&k->tune, g, dt);
    if (!autotune_due(&k->tune, g))
        return DDP_OK;
    double best;
    TRY(autotune_choose(&k->tune, k->comm, k->be, k->tunebuf, &best, k->err));
    if (k->rank == 0) {
        ddp_area_t *a = k->area;
        a->ntuned = k->tune.n;
        for (int i = 0; i < k->tune.n && i < RESULT_TUNE_MAX; i++) {
            a->tuned_mb[i] = k->tune.mb[i];
            a->tuned_s[i] = k->tune.step_s[i];
        }
        a->bucket_mb_chosen = best;
    }
    return rebucket(k, best);
}

static void rank_teardown(rank_t *k)
{
    stager_free(&k->stg);
    if (k->be) {
        backend_sync(k->be); /* no copy may still use the loss buffers */
        if (k->loss_host)
            backend_free_host(k->be, k->loss_host);
        backend_free(k->be, k->tunebuf);
        backend_free(k->be, k->lossbuf);
    }
    step_meter_free(&k->meter);
    free(k->host_params);
    ckpt_run_free(&k->ck);
    zero1_free(&k->z);
    reducer_free(&k->red);
    optim_free(&k->opt);
    replica_free(&k->rep);
    schedule_free(&k->sch);
    comm_destroy(k->comm);
    backend_destroy(k->be);
}

// ---------------------------------------------------------------------------
// training

/* The last micro-batch of step g in which this rank has rows (-1: none,
 * the rank shadows the step), and how many it has rows in. */
static int last_micro(rank_t *k, long g, int *nmicro)
{
    int last = -1;
    *nmicro = 0;
    for (int m = 0; m < k->cfg->accum; m++)
        if (schedule_rank_micro_rows(&k->sch, g, m, k->rank) > 0) {
            last = m;
            (*nmicro)++;
        }
    return last;
}

/* --explain, rank 0, the told step: the buckets as they ran, timed
 * from the start of the backward pass that all-reduced them (reducer_spans
 * has just placed them). */
static void story_buckets(rank_t *k, double bwd_t0, double bwd_t1)
{
    step_story_t *st = &k->area->story;
    const reducer_t *r = &k->red;
    move_stat_t *mv = &st->move[MOVE_ALLREDUCE];
    double first = 0.0, last = 0.0;
    st->nbuckets = r->nb;
    st->backward_s = bwd_t1 - bwd_t0;
    for (int i = 0; i < r->nb; i++) {
        const bucket_t *b = &r->b[i];
        uint64_t bytes = (uint64_t)b->count * sizeof(float);
        mv->bytes += bytes;
        mv->ops++;
        if (b->span.end_s > 0.0) {
            first = mv->ops == 1 || b->span.start_s < first ? b->span.start_s : first;
            last = b->span.end_s > last ? b->span.end_s : last;
        }
        if (i < STORY_MAX_BUCKETS)
            /* layers in the order backward reaches them: last first */
            st->bucket[i] = (bucket_story_t){b->last_param / 2, b->first_param / 2, bytes,
                                             b->ready_s - bwd_t0, b->span.start_s - bwd_t0,
                                             b->span.end_s - bwd_t0};
    }
    mv->seconds = last > first ? last - first : 0.0;
}

/* The step meter's callback once step r->g has run (at once on the CPU, when
 * the next step ends on a GPU): the buckets' communication hidden behind the
 * last backward, their --trace events and --explain story, and the fetched
 * global loss with rank 0's progress decision. */
static void rank_resolved(void *ctx, step_meter_t *m, step_rec_t *r)
{
    (void)m;
    rank_t *k = ctx;
    double b0 = 0.0, b1 = 0.0;
    step_rec_last_lap(r, PH_BACKWARD, &b0, &b1);
    r->charge[PH_COMM_HIDDEN] += reducer_spans(&k->red, r, b0, b1);
    if (r->timed) { /* each bucket's all-reduce, for its bus bandwidth in the report */
        k->rec->nbuckets = k->red.nb < STORY_MAX_BUCKETS ? k->red.nb : STORY_MAX_BUCKETS;
        for (int i = 0; i < k->rec->nbuckets; i++) {
            const bucket_t *b = &k->red.b[i];
            k->rec->bucket_bytes[i] = (double)b->count * sizeof(float);
            k->rec->bucket_s[i] +=
                b->span.end_s > b->span.start_s ? b->span.end_s - b->span.start_s : 0.0;
        }
    }
    for (int i = 0; i < k->red.nb && k->tr; i++) {
        const bucket_t *b = &k->red.b[i];
        if (b->span.end_s > 0.0)
            trace_bucket(k->tr, k->cfg->zero1 ? TR_REDUCE_SCATTER : TR_ALLREDUCE, b->ready_s,
                         b->span.start_s, b->span.end_s, (uint64_t)b->count * sizeof(float), i);
    }
    if (r->first && k->rank == 0)
        story_buckets(k, b0, b1);
    if (r->nfetch == 3) {
        const float *global = r->fetched;
        r->mean = (double)global[0] / (double)global[1];
        /* Every rank reads the same decision at the same step (this one's
         * report) and applies it to a step none has decided yet: on a GPU
         * the step after the one being queued. */
        long ahead = (long)global[2];
        long at = r->g + ahead, soonest = k->cur_g + 1;
        k->progress_at = ahead > 0 ? (at > soonest ? at : soonest) : -1;
    }
}

/* --slow-rank R:F: a straggler, the real work of a slower device, F - 1
 * times the step's forward and backward more (F fractional: 1.1 is 10% more).
 * The extra work of the step, (F - 1) x its micro-batches, is split into
 * whole passes and a fraction:
 * - the whole passes, before its first backward of the step: forwards that
 *   write the activations the real one wrote (the same rows, the same bits),
 *   and backwards that, with no gradient of the step yet to add to, write
 *   the gradients the real backward then writes again (straggle());
 * - the fraction frac, on the CPU: the rank computes on for frac x the CPU
 *   time its own forward, loss and backward took in the last step
 *   (straggle_spin(), on the thread's CPU clock, so being preempted by
 *   another process stretches it the way it stretches real work).  Rows
 *   would not do: measured on mlp-small, a pass over half the rows took 29%
 *   of a whole pass's CPU time, not 50% (the smaller pass stays in cache).
 * - the fraction on a GPU: a forward and backward of the first
 *   round(frac x rows) rows of the micro-batch, before its real forward
 *   (straggle_part(); the host cannot time kernels without waiting for
 *   them).  A GEMM over fewer rows may round a row differently, so it goes
 *   where the real forward and backward overwrite all it wrote; its backward
 *   reads the output gradient the buffer holds (the last step's, or zeros),
 *   and its gradients are discarded all the same.  Kernels like any other:
 *   the host still waits nowhere.
 * The same bits as without --slow-rank either way. */
static int straggle(rank_t *k, const float *x, int rows, int times)
{
    replica_t *rep = &k->rep;
    for (int i = 0; i < times; i++)
        TRY(dev(k, model_forward(rep, x, rows)));
    step_meter_lap(&k->meter, PH_FORWARD);
    for (int i = 0; i < times; i++)
        TRY(dev(k, model_backward(rep, x, rows, rep->dout, false, NULL, NULL)));
    step_meter_lap(&k->meter, PH_BACKWARD);
    return DDP_OK;
}

static int straggle_part(rank_t *k, const float *x, int rows)
{
    replica_t *rep = &k->rep;
    TRY(dev(k, model_forward(rep, x, rows)));
    step_meter_lap(&k->meter, PH_FORWARD);
    TRY(dev(k, model_backward(rep, x, rows, rep->dout, false, NULL, NULL)));
    step_meter_lap(&k->meter, PH_BACKWARD);
    return DDP_OK;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Compute on this thread until it has used `cpu_s` more CPU seconds. */
static void straggle_spin(rank_t *k, double cpu_s)
{
    volatile double acc = 1.0;
    double until = thread_cpu_s() + cpu_s;
    while (thread_cpu_s() < until)
        for (int i = 0; i < 256; i++)
            acc = acc * 1.0000001 + 1e-9;
    step_meter_lap(&k->meter, PH_BACKWARD);
}

/* The slow rank's extra work this step: whole micro-batch passes, and the
 * fraction of one pass left over (0 <= *frac < 1). */
static int straggle_plan(const config_t *cfg, int nmicro, double *frac)
{
    double extra = (cfg->slow_factor - 1.0) * nmicro;
    int whole = (int)floor(extra + 1e-9);
    *frac = extra - whole > 1e-9 ? extra - whole : 0.0;
    return whole;
}

/* Step g: every micro-batch forward, loss, backward (buckets all-reduced as
 * backward fills them, on the last micro-batch), then the rest of the
 * buckets and, on loss steps, the loss; the optimizer once all are in.
 * Nothing here waits for the device: the GPU orders the collectives after
 * the gradients and the optimizer after the collectives. */
static int rank_step(rank_t *k, long g, bool want_loss)
{
    const config_t *cfg = k->cfg;
    backend_t *be = k->be;
    replica_t *rep = &k->rep;
    step_meter_t *m = &k->meter;

    fault_kind_t f = fault_at(k->rank, g);
    if (f == FAULT_ERROR)
        return err_set(k->err, DDP_ERR_RUNTIME, "injected fault at step %ld", g);
    fault_raise(f); /* kill, exit, stall: never returns */

    /* The step's loss is the mean over its rows on every rank together.  A
     * rank's share of them varies (86, 85, 85 rows; none once its shard is
     * used up), so each rank scales its sum by 1 / global rows and the
     * buckets are summed: every rank gets sum over all rows / global rows,
     * its gradient weighted by its share, with the mean's one division
     * folded in here, once (as in single mode). */
    size_t step_rows = schedule_step_rows(&k->sch, g), my_rows = schedule_view_rows(&k->sch, g);
    float scale = 1.0f / (float)step_rows;
    int nmicro, last_mi = last_micro(k, g, &nmicro);
    bool has_grad = false;
    /* --slow-rank: the real compute's CPU time, without the extra work */
    bool slow = k->rank == cfg->slow_rank && cfg->slow_factor > 1.0;
    bool on_cpu = cfg->backend == BACKEND_CPU;
    double cpu0 = slow && on_cpu ? thread_cpu_s() : 0.0, extra_cpu = 0.0;
    for (int mi = 0; mi <= last_mi; mi++) {
        int rows;
        const uint32_t *idx = schedule_micro(&k->sch, g, mi, &rows);
        if (rows == 0)
            continue; /* a micro-batch too small to reach this rank */
        bool last = mi == last_mi;
        float *x, *y;
        TRY(dev(k, stager_stage(&k->stg, k->data, idx, rows, m, &x, &y)));
        double frac = 0.0;
        int whole = slow && !has_grad ? straggle_plan(cfg, nmicro, &frac) : 0;
        long part_rows = frac > 0 && !on_cpu ? lround(frac * rows) : 0;
        if (part_rows >= rows) { /* rounds up to a whole pass */
            whole++;
            part_rows = 0;
        }
        if (part_rows > 0)
            TRY(straggle_part(k, x, (int)part_rows));
        TRY(dev(k, model_forward(rep, x, rows)));
        step_meter_lap(m, PH_FORWARD);
        TRY(dev(k, model_loss(rep, cfg->loss, y, rows, scale)));
        if (want_loss) /* the step's loss sum, on the device */
            TRY(dev(k, !has_grad ? backend_d2d(be, k->lossbuf, rep->loss_sum, sizeof(float))
                                 : backend_axpy(be, 1.0f, rep->loss_sum, k->lossbuf, 1)));
        step_meter_lap(m, PH_LOSS);
        double e0 = slow && on_cpu ? thread_cpu_s() : 0.0;
        if (whole > 0)
            TRY(straggle(k, x, rows, whole));
        if (frac > 0 && on_cpu) /* nmicro real passes took compute_cpu_s last step */
            straggle_spin(k, frac * k->compute_cpu_s / nmicro);
        if (slow && on_cpu)
            extra_cpu += thread_cpu_s() - e0;
        /* no_sync on all but the last micro-batch: gradients only accumulate. */
        reducer_begin(&k->red, last, g);
        int rc = model_backward(rep, x, rows, rep->dout, has_grad, reducer_hook, &k->red);
        if (rc != DDP_OK) /* the hook's failure is the comm's, else the device's */
            return k->red.launch_failed ? coll(k, rc) : dev(k, rc);
        step_meter_lap(m, PH_BACKWARD);
        step_meter_rows(m, rows);
        has_grad = true;
    }
    if (slow && on_cpu && has_grad) /* the real work alone: the next step's unit */
        k->compute_cpu_s = thread_cpu_s() - cpu0 - extra_cpu;
    if (!has_grad) {
        /* No rows this step (its shard is used up, or the batch ended
         * before its turn): it still takes part in every all-reduce, with
         * zero gradients that add nothing to the sum (torch's Join hook
         * shadows the others' all-reduces the same way). */
        TRY(dev(k, backend_memset0(be, rep->grads, k->spec.nparams * sizeof(float))));
        if (want_loss)
            TRY(dev(k, backend_memset0(be, k->lossbuf, sizeof(float))));
        step_meter_lap(m, PH_BACKWARD);
        reducer_begin(&k->red, true, g);
    }

    /* The rest of the buckets (all of them under --no-overlap), then, on
     * loss steps, the loss: the same sequence of collectives on every rank. */
    TRY(coll(k, reducer_launch_rest(&k->red)));
    if (want_loss) {
        float *lh = k->loss_host + 3 * (g & 1); /* a step's copy is read before g+2 */
        lh[1] = (float)my_rows;
        /* Rank 0's decision (the others add 0): in how many steps the
         * progress line next wants a loss; 0 when it is off.  A small whole
         * number, exact in a float. */
        lh[2] = k->rank == 0 ? (float)progress_steps_to_due(&k->prog) : 0.0f;
        TRY(dev(k, backend_h2d(be, k->lossbuf + 1, lh + 1, 2 * sizeof(float))));
        comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = k->lossbuf, .count = 3,
                        .redop = REDOP_SUM, .tag = "the loss"};
        /* Over shm on the CPU nothing is left to overlap it with: run it at
         * once on this thread (comm.h's run); elsewhere queue it. */
        TRY(coll(k, k->red.run_rest ? comm_run(k->comm, &op, NULL)
                                    : comm_all_reduce_async(k->comm, k->lossbuf, 3, REDOP_SUM,
                                                            "the loss", NULL)));
    }
    /* The optimizer needs every bucket summed: its stream waits for all. */
    TRY(coll(k, comm_wait_all(k->comm)));
    step_meter_lap(m, PH_COMM_EXPOSED);
    if (want_loss)
        step_meter_fetch(m, k->lossbuf, 3);

    if (cfg->zero1) {
        /* ZeRO-1: this rank steps its shard, and every bucket's parameters
         * are all-gathered; the next step's forward needs them all. */
        TRY(zero1_step(&k->z, k->comm, rep->params, rep->grads, k->err));
        step_meter_lap(m, PH_OPTIM);
        TRY(coll(k, comm_wait_all(k->comm)));
        step_meter_lap(m, PH_COMM_EXPOSED);
    } else {
        TRY(dev(k, optim_step(&k->opt, rep->params, rep->grads)));
        step_meter_lap(m, PH_OPTIM);
    }
    if (step_meter_first(m) && k->rank == 0) { /* --explain: what the told step moved */
        step_story_t *st = &k->area->story;
        move_stat_t *mb = &st->move[MOVE_BATCH];
        /* every rank gathers its own part, in parallel: rank 0's time (its
         * seconds once the meter has reported the step, in rank_train) */
        mb->bytes = (uint64_t)step_rows * (uint64_t)(k->data->in_dim + k->data->tgt_cols) *
                    sizeof(float);
        mb->ops = nmicro * k->world;
    }
    return DDP_OK;
}

/* After step g, when a checkpoint is due: rank 0 writes it, then every rank
 * meets at a barrier. */
static int rank_checkpoint(rank_t *k, long g)
{
    if (!ckpt_run_due(&k->ck, &k->sch, g))
        return DDP_OK;
    /* Rank 0 writes: every rank holds the same parameters and optimizer
     * state (the same averaged gradients applied to the same start), so one
     * copy is the checkpoint.  The copies wait for its optimizer step, so
     * they hold the state after step g. */
    if (k->rank == 0) {
        /* A signal's default action must not cut the write in half (it would
         * leave a full-size temporary): one that comes meanwhile is
         * delivered when the file is complete and in place. */
        interrupt_hold(true);
        int wrc = ckpt_run_write(&k->ck, &k->sch, k->rep.params, &k->opt, g, k->err);
        interrupt_hold(false);
        TRY(wrc);
    }
    /* Barrier: nobody runs ahead while rank 0 writes.  Without it the others
     * would wait for rank 0 inside step g+1's first all-reduce, bounded by
     * --timeout, which a slow disk could exceed; and after the last step
     * they would exit while the last checkpoint is still being written.  So
     * this one wait allows for the write: --timeout plus 30 s plus the file
     * at 20 MB/s.  Every op before it was waited for (rank_step's wait_all),
     * so no op is launched that reads the timeout before it changes (comm.h). */
    double bytes = (double)k->spec.nparams * sizeof(float) * (1.0 + k->ck.nstate);
    double saved = comm_timeout(k->comm);
    comm_set_timeout(k->comm, saved + 30.0 + bytes / 20e6);
    int rc = comm_barrier(k->comm);
    /* Why sync: under NCCL the barrier's wait is the GPU's and returns at
     * once; the host must wait here, while the longer bound holds (the watch
     * reads it), not in the next step under --timeout alone. */
    int drc = rc == DDP_OK ? backend_sync(k->be) : DDP_OK;
    comm_set_timeout(k->comm, saved);
    if (rc != DDP_OK)
        return coll(k, rc);
    return dev(k, drc); /* a watch failure carries the comm's message */
}

static int rank_train(rank_t *k)
{
    ddp_rank_rec_t *rec = k->rec;
    schedule_t *sch = &k->sch;
    step_meter_t *m = &k->meter;
    /* Rank 0 draws the progress line; on the others it stays off. */
    if (k->rank == 0)
        progress_init(&k->prog, k->cfg, "ddp", sch->total_steps);
    double t_start = now_s();
    for (long g = sch->start_step; g < sch->total_steps; g++) {
        /* The loss is a collective: every rank must agree on fetching it.
         * The loss log's steps follow from the schedule; the progress line's
         * come from rank 0 on an earlier loss all-reduce (progress_at), so
         * no rank decides alone from its own clock. */
        bool logs = schedule_logs(sch, g);
        bool want_loss = logs || g == k->progress_at;
        long rows = (long)schedule_step_rows(sch, g);
        bool active = schedule_rank_active(sch, g, k->rank);
        if (!active && !k->cfg->join) {
            /* --no-join: out of data, this rank leaves the loop, as a rank
             * whose DataLoader ends first does in PyTorch; the others will
             * wait for it in their next all-reduce until --timeout. */
            rec->left = true;
            rec->left_step = g;
            break;
        }
        k->cur_g = g;
        TRY(rank_autotune_before(k, g));
        /* --explain tells the middle timed step (schedule_told_step) */
        step_meter_begin(m, g, schedule_timed(sch, g), g == schedule_told_step(sch));
        TRY(rank_step(k, g, want_loss));
        TRY(step_meter_end(m,
                           &(step_end_t){.samples = (long)schedule_view_rows(sch, g),
                                         .global_samples = rows,
                                         .total = sch->total_steps,
                                         .epoch = schedule_epoch_of(sch, g),
                                         .logs = logs},
                           k->err));
        TRY(rank_autotune_after(k));
        if (active)
            rec->stats.steps_run++;
        else
            rec->stats.steps_shadowed++;
        TRY(rank_checkpoint(k, g));
    }
    TRY(step_meter_finish(m, k->err));
    progress_end(&k->prog);
    rec->total_s = now_s() - t_start;
    if (k->rank == 0)
        k->area->story.move[MOVE_BATCH].seconds =
            rec->stats.first_phase_s[PH_DATA] + rec->stats.first_phase_s[PH_H2D];

    /* Every rank's final parameters, checksummed so the supervisor can check
     * the replicas never drifted apart; rank 0's travel back in full. */
    float *host = ddp_area_params(k->area);
    float *mine = k->rank == 0 ? host : malloc(k->spec.nparams * sizeof(float));
    if (!mine)
        return err_set(k->err, DDP_ERR_RUNTIME, "out of memory for the final parameters");
    int rc = backend_d2h(k->be, mine, k->rep.params, k->spec.nparams * sizeof(float));
    if (rc == DDP_OK)
        rec->checksum = model_checksum(mine, k->spec.nparams);
    if (mine != host)
        free(mine);
    TRY(dev(k, rc));
    rec->stats.mem_peak = backend_mem_peak(k->be);
    backend_mem_peak_split(k->be, rec->stats.mem_split);
    return DDP_OK;
}

ddp_rank_config_fn ddp_rank_config_hook;

int ddp_rank_run(const config_t *cfg, const dataset_t *data, const ddp_env_t *env)
{
    if (ddp_rank_config_hook) /* this rank's own configuration (ddp_shared.h) */
        cfg = ddp_rank_config_hook(cfg, env->rank);
    rank_t k;
    memset(&k, 0, sizeof k);
    k.cfg = cfg;
    k.data = data;
    k.env = env;
    k.rank = env->rank;
    k.world = env->world;
    k.area = env->area;
    k.rec = &k.area->rank[k.rank];
    k.rec->stats.device_id = cfg->gpus[k.rank];
    k.rec->state = RANK_RUNNING;
    k.tr = ddp_area_trace(k.area, k.rank); /* set up by the supervisor; only this rank writes it */
    k.tuned_g = -1;

    int rc = rank_setup(&k);
    if (rc == DDP_OK)
        rc = rank_train(&k);
    if (rc != DDP_OK) {
        /* Record why first, then abort the group: the supervisor reports the
         * first rank that aborted, with this message. */
        k.rec->rc = rc;
        snprintf(k.rec->msg, sizeof k.rec->msg, "%s", k.err[0] ? k.err : "unknown error");
        k.rec->state = RANK_FAILED;
        if (k.comm)
            comm_abort(k.comm, k.rec->msg);
        else if (env->seg) /* under mpirun the launcher ends the job instead */
            comm_seg_abort(env->seg, k.rank, k.rec->msg);
    } else {
        k.rec->state = RANK_DONE;
    }
    progress_end(&k.prog); /* a fault must not leave a half line on the terminal */
    rank_teardown(&k);
    return rc;
}
