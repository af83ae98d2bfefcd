/* ddp/rank.c: one DDP rank, in its own process (forked, or started by
 * mpirun): its device, its communicator, its shard of the data
 * (DistributedSampler), a full replica and optimizer, and the gradients
 * averaged over ranks in buckets while backward runs.  What it measured goes
 * back to the supervisor through the shared segment, or under mpirun to rank
 * 0 by MPI (ddp_shared.h, launch.h).  On a GPU the host only queues a step:
 * the buckets' waits are the GPU's (comm.h), the loss is fetched without
 * waiting, and the step meter's wait for the previous step is the step's one
 * host synchronisation.  With --cuda-graph, a full step after the first is
 * captured once per parity and replayed as one graph launch (rank_step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/base/fault.h"
#include "common/data/schedule.h"
#include "ddp/autotune.h"
#include "ddp/ddp_shared.h"
#include "ddp/fingerprint.h"
#include "ddp/global_loss.h"
#include "ddp/launch.h"
#include "ddp/comm_hook.h"
#include "ddp/reducer.h"
#include "ddp/straggle.h"
#include "ddp/zero.h"
#include "ddp/zero1.h"
#include "common/base/interrupt.h"
#include "common/io/checkpoint.h"
#include "common/measure/step_meter.h"
#include "common/nn/optim.h"
#include "common/train/graph_probe.h"
#include "common/train/stage.h"
#include "common/train/trainer.h"

/* The checkpoint barrier's allowance beyond --timeout for rank 0's write: a
 * fixed margin, and the file at a slow disk's speed (bytes/s). */
#define CKPT_WAIT_EXTRA_S 30.0
#define CKPT_WAIT_DISK_BPS 20e6

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
    zero1_t z;          /* --zero 1: the shard it steps */
    zero_t zz;          /* --zero 2, 3: the shard, its buffers and the layer hooks */
    stager_t stg;       /* batch staging */
    float *host_params; /* rank 0's initial parameters (every rank's with --resume) */
    global_loss_t loss; /* the step's loss over every rank (on the steps that log it) */
    ckpt_run_t ck;      /* --resume (every rank) and --checkpoint (rank 0 writes) */
    trace_rec_t *tr;    /* --trace: this rank's recorder in the segment, or NULL */
    step_meter_t meter;
    straggle_t slow;    /* --slow-rank: the straggler's extra work */
    autotune_t tune;    /* --bucket-mb auto */
    long tuned_g;       /* the last step whose time it was given (-1: none) */
    float *tunebuf;     /* device [AUTOTUNE_MAX]: its all-reduce */
    bool graphs;        /* --cuda-graph: full steps replayed as CUDA graphs */
    int gkey;           /* the graph the step being queued is in (-1: eager) */
    char err[ERR_LEN];
} rank_t;

/* A call on the rank's device or communicator: a failure keeps their own
 * message (the supervisor names the rank and the device). */
static int dev(rank_t *me, int rc) { return backend_check(me->be, rc, NULL, me->err); }
static int coll(rank_t *me, int rc) { return comm_check(me->comm, rc, NULL, me->err); }
/* The comm hook uses both: the communicator's message when it failed, else the device's. */
static int hooked(rank_t *me, int rc)
{
    return rc == DDP_OK || strcmp(comm_last_error(me->comm), "unknown error") ? coll(me, rc)
                                                                              : dev(me, rc);
}

static void rank_resolved(void *ctx, step_meter_t *m, step_rec_t *r);

// ---------------------------------------------------------------------------
// setup: device, communicator, shard, replica, optimizer, initial parameters

static int rank_setup(rank_t *me)
{
    const config_t *cfg = me->cfg;
    TRY(config_model_spec(cfg, &me->spec, me->err));
    /* The device is created here, after fork: CUDA does not survive fork. */
    TRY(backend_create(&me->be, cfg->backend, cfg->gpus[me->rank], 1, me->err));
    TRY(dev(me, backend_set_precision(me->be, cfg->precision)));
    comm_args_t ca = {cfg->comm, me->world, me->rank, me->be, me->env->seg, cfg->timeout_s, 0.0,
                      me->env->exchange, me->env->exchange_ctx};
    TRY(comm_create(&me->comm, &ca, me->err));
    /* Every rank on the same job before anything trains (fingerprint.h);
     * under mpirun the launcher compared the same fingerprints before
     * anything ran, each rank's own parse, data and binary. */
    if (cfg->launcher != LAUNCHER_MPI) {
        static fingerprint_t fp; /* 3 KiB: off the stack */
        fingerprint_make(&fp, cfg, me->data);
        TRY(ddp_fingerprint_check(me->comm, me->be, &fp, cfg->gpus, me->err));
    }
    TRY(schedule_init(&me->sch, cfg, me->data, me->world, me->rank, me->err));
    /* this rank's part of a micro-batch: ceil((B - rank) / world) rows (at
     * least 1 row of room: a rank past a small batch's end reads none) */
    int local_batch = (cfg->batch - me->rank + me->world - 1) / me->world;
    if (local_batch < 1)
        local_batch = 1;
    /* ZeRO-2 holds no whole gradients, ZeRO-3 no whole parameters either */
    unsigned skip = cfg->zero >= 2 ? zero_replica_skip(cfg->zero, cfg->accum) : 0;
    TRY(replica_init_sharded(&me->rep, me->be, &me->spec, local_batch, me->data->tgt_cols, skip,
                             me->err));
    TRY(reducer_init(&me->red, me->comm, &me->meter, &me->spec, me->rep.grads, cfg->first_bucket_mb,
                     cfg->bucket_mb, cfg->overlap, me->err));
    TRY(zero_buckets(&me->red, cfg->zero, me->err)); /* ZeRO-3: a bucket per layer */
    /* Shared memory (or MPI) on host buffers: what backward leaves (the last
     * bucket) runs on this thread; a hand-off to the comm thread would cost
     * two wake-ups and overlap nothing.  NCCL has no hand-off: launch from the
     * hook, so the GPU starts it as soon as backward's kernels are done. */
    TRY(comm_hook_init(&me->red.hook, cfg, me->be, &me->red, me->err));
    comm_kind_t kind = comm_resolve(cfg->comm, cfg->backend);
    me->red.run_rest = (kind == COMM_SHM || kind == COMM_MPI) && backend_host_visible(me->be);
    if (cfg->zero) { /* the buckets are reduce-scattered; the state is this rank's shard */
        me->red.shard_world = me->world;
        me->red.shard_rank = me->rank;
    }
    size_t state =
        cfg->zero ? zero1_state_floats(&me->red, me->world, me->rank) : me->spec.nparams;
    TRY(optim_init(&me->opt, me->be, &cfg->optim, state, me->err));
    if (cfg->zero == 1)
        TRY(zero1_init(&me->z, &me->red, &me->opt, me->world, me->rank, me->red.run_rest, me->err));
    if (cfg->zero >= 2)
        TRY(zero_init(&me->zz, cfg->zero, me->be, me->comm, &me->rep, &me->red, &me->opt,
                      &me->meter, cfg->accum, me->err));
    TRY(ckpt_run_init(&me->ck, cfg, &me->spec, &me->opt, 0, me->err));
    if (cfg->bucket_auto) {
        autotune_init(&me->tune, &me->spec, cfg->first_bucket_mb, me->sch.start_step,
                      schedule_warmup(&me->sch));
        if (!(me->tunebuf = backend_alloc_for(me->be, AUTOTUNE_MAX * sizeof(float), MEM_COMM)))
            return err_set(me->err, DDP_ERR_RUNTIME, "out of device memory");
    }
    TRY(global_loss_init(&me->loss, me->be, me->comm, me->err));
    TRY(stager_init(&me->stg, me->be, me->rep.x, me->rep.y, local_batch, cfg->accum, me->data,
                    me->err));
    straggle_init(&me->slow, cfg, me->rank, me->be, &me->rep, &me->meter);
    me->graphs = config_graphs_on(cfg, MODE_DDP);
    /* Before anything is captured, every rank together: whether NCCL
     * captures at all (the policy, shared with DP: train/graph_probe.h). */
    me->rec->graph_refused[0] = 0;
    if (me->graphs && comm_resolve(cfg->comm, cfg->backend) == COMM_NCCL) {
        char place[64];
        snprintf(place, sizeof place, "rank %d (device %d)", me->rank, cfg->gpus[me->rank]);
        TRY(trainer_graph_probe(cfg, me->comm, place, "every rank", &me->graphs,
                                me->rec->graph_refused, me->err));
    }
    /* Rank 0's initial parameters reach everyone by broadcast, as DDP's
     * constructor does (they are equal anyway when every rank uses --seed). */
    if (me->rank == 0 || cfg->resume_path[0]) {
        me->host_params = malloc(me->spec.nparams * sizeof(float));
        if (!me->host_params)
            return err_set(me->err, DDP_ERR_RUNTIME, "out of memory for the parameters");
    }
    if (me->rank == 0)
        TRY(trainer_initial_params(cfg, &me->spec, me->host_params, me->err));
    /* --resume: every rank reads the same file, so each has the optimizer
     * state and step of the checkpoint (DDP keeps one per rank, identical)
     * and the same first step; the parameters still come by broadcast. */
    TRY(ckpt_run_resume(&me->ck, &me->sch, me->host_params, &me->opt, me->err));
    if (me->rank == 0) {
        me->area->start_step = me->sch.start_step;
        if (cfg->zero < 3)
            TRY(dev(me, backend_h2d(me->be, me->rep.params, me->host_params,
                                   me->spec.nparams * sizeof(float))));
    }
    double t0 = now_s();
    if (cfg->zero >= 3) /* layer by layer: no rank holds the whole model */
        TRY(zero_params_in(&me->zz, me->host_params, me->err));
    else
        TRY(coll(me, comm_broadcast(me->comm, me->rep.params, me->spec.nparams, 0)));
    TRY(dev(me, backend_sync(me->be)));
    double broadcast_s = now_s() - t0;

    /* Every rank keeps its own phases and step times (the supervisor takes
     * the slowest rank's); rank 0 also the loss log, the progress line and
     * --explain's story.  All of it but the line lives in the shared area. */
    ddp_rank_rec_t *rec = me->rec;
    if (me->rank == 0)
        rec->log = (loss_log_t){.pt = ddp_area_log(me->area), .cap = me->area->max_log,
                                .fixed = true};
    TRY(step_meter_init(&me->meter,
                        &(step_meter_sinks_t){
                            .cfg = cfg,
                            .dev = &rec->stats,
                            .trace = me->tr,
                            .times = &rec->times,
                            .log = me->rank == 0 ? &rec->log : NULL,
                            .final_loss = &rec->final_loss,
                            .story = me->rank == 0 ? &me->area->story : NULL,
                            .stagers = me->world, /* every rank stages its own rows */
                            .progress = me->rank == 0 ? "ddp" : NULL,
                            .total_steps = me->sch.total_steps,
                            .be = me->be,
                            .resolved = rank_resolved,
                            .ctx = me,
                        },
                        me->err));
    /* --explain: the initial parameters' broadcast, once before the steps */
    step_meter_moved(&me->meter, MOVE_BROADCAST, me->spec.nparams * sizeof(float), broadcast_s);
    return DDP_OK;
}

/* New buckets with this cap.  Between steps, with every earlier step
 * reported (the meter resolved them), so no all-reduce of the old buckets is
 * still to be read. */
static int rebucket(rank_t *me, double mb)
{
    TRY(step_meter_finish(&me->meter, me->err));
    bool run_rest = me->red.run_rest;
    reducer_free(&me->red);
    backend_graph_reset(me->be); /* other buckets: other collectives to capture */
    TRY(reducer_init(&me->red, me->comm, &me->meter, &me->spec, me->rep.grads,
                     me->cfg->first_bucket_mb, mb, me->cfg->overlap, me->err));
    me->red.run_rest = run_rest;
    return DDP_OK;
}

/* --bucket-mb auto before step g: the candidate cap it tries, if any. */
static int rank_autotune_after(rank_t *me);

static int rank_autotune_before(rank_t *me, long g)
{
    if (!me->cfg->bucket_auto)
        return DDP_OK;
    /* The choice comes before the step after the last candidate.  On a
     * device that step's candidate reports only when the next step ends:
     * have it report now (a wait, in the warm-up), so every timed step runs
     * with the chosen cap. */
    if (autotune_due(&me->tune, g - 1) && me->tuned_g < g - 1) {
        TRY(step_meter_finish(&me->meter, me->err));
        TRY(rank_autotune_after(me));
    }
    double mb = autotune_before(&me->tune, g);
    return mb > 0.0 ? rebucket(me, mb) : DDP_OK;
}

/* --bucket-mb auto after a step ended: the time of each step as the meter
 * reports it (at once on the CPU, a step later on a GPU) and, after the last
 * candidate's, the choice, the same on every rank. */
static int rank_autotune_after(rank_t *me)
{
    long g;
    double dt;
    if (!me->cfg->bucket_auto || !step_meter_resolved(&me->meter, &g, &dt) || g == me->tuned_g)
        return DDP_OK;
    me->tuned_g = g;
    autotune_after(&me->tune, g, dt);
    if (!autotune_due(&me->tune, g))
        return DDP_OK;
    double best;
    TRY(autotune_choose(&me->tune, me->comm, me->be, me->tunebuf, &best, me->err));
    if (me->rank == 0) {
        ddp_area_t *a = me->area;
        a->ntuned = me->tune.n;
        for (int i = 0; i < me->tune.n && i < RESULT_TUNE_MAX; i++) {
            a->tuned_mb[i] = me->tune.mb[i];
            a->tuned_s[i] = me->tune.step_s[i];
        }
        a->bucket_mb_chosen = best;
    }
    return rebucket(me, best);
}

static void rank_teardown(rank_t *me)
{
    stager_free(&me->stg);
    global_loss_free(&me->loss); /* waits for the device: no copy still uses them */
    if (me->be)
        backend_free(me->be, me->tunebuf);
    step_meter_free(&me->meter);
    free(me->host_params);
    ckpt_run_free(&me->ck);
    zero1_free(&me->z);
    zero_free(&me->zz);
    comm_hook_free(me->red.hook);
    reducer_free(&me->red);
    optim_free(&me->opt);
    replica_free(&me->rep);
    schedule_free(&me->sch);
    /* The graphs first: NCCL frees a communicator only once no CUDA graph
     * holds its captured collectives (ncclCommDestroy and ncclCommAbort wait
     * for that, forever when the graphs outlive them). */
    if (me->be)
        backend_graph_reset(me->be);
    comm_destroy(me->comm);
    backend_destroy(me->be);
}

// ---------------------------------------------------------------------------
// training

/* The last micro-batch of step g in which this rank has rows (-1: none,
 * the rank shadows the step), and how many it has rows in. */
static int last_micro(rank_t *me, long g, int *nmicro)
{
    int last = -1;
    *nmicro = 0;
    for (int m = 0; m < me->cfg->accum; m++)
        if (schedule_rank_micro_rows(&me->sch, g, m, me->rank) > 0) {
            last = m;
            (*nmicro)++;
        }
    return last;
}

/* The step meter's callback once step r->g has run (at once on the CPU, when
 * the next step ends on a GPU): the buckets' communication hidden behind the
 * last backward (the reducer adds its buckets to --explain's story) and
 * their --trace events. */
static void rank_resolved(void *ctx, step_meter_t *m, step_rec_t *r)
{
    (void)m;
    rank_t *me = ctx;
    double b0 = 0.0, b1 = 0.0, l0, l1;
    step_rec_last_lap(r, PH_BACKWARD, &b0, &b1);
    /* ZeRO-2 and -3 split the backward pass into laps around their waits:
     * it runs from the last loss to the last backward lap */
    if (me->cfg->zero >= 2 && step_rec_last_lap(r, PH_LOSS, &l0, &l1) && l1 < b1)
        b0 = l1;
    r->charge[PH_COMM_HIDDEN] += reducer_spans(&me->red, r, b0, b1);
    if (r->timed) { /* each bucket's all-reduce, for its bus bandwidth in the report */
        me->rec->nbuckets = me->red.nb < STORY_MAX_BUCKETS ? me->red.nb : STORY_MAX_BUCKETS;
        for (int i = 0; i < me->rec->nbuckets; i++) {
            const bucket_t *b = &me->red.b[i];
            me->rec->bucket_bytes[i] = comm_hook_bytes(me->red.hook, &me->red, i);
            me->rec->bucket_s[i] +=
                b->span.end_s > b->span.start_s ? b->span.end_s - b->span.start_s : 0.0;
        }
    }
    for (int i = 0; i < me->red.nb && me->tr; i++) {
        const bucket_t *b = &me->red.b[i];
        if (b->span.end_s > 0.0)
            trace_bucket(me->tr, me->cfg->zero ? TR_REDUCE_SCATTER : TR_ALLREDUCE, b->ready_s,
                         b->span.start_s, b->span.end_s, (uint64_t)b->count * sizeof(float), i);
    }
}

/* Is step g one CUDA graphs replay?  The same answer on every rank (all of
 * it from the schedule and the options), so the ranks' steps hold the same
 * collectives either way: a full step (every rank its whole batch: no short
 * last batch, no rank out of data under --join) after the first (SGD's
 * first momentum step is other work) with the buckets settled (--bucket-mb
 * auto tries caps in the warm-up: a new cap drops the graphs). */
static bool rank_graph_step(rank_t *me, long g)
{
    if (!me->graphs || g <= me->sch.start_step || !schedule_full_step(&me->sch, g))
        return false;
    return !me->cfg->bucket_auto || me->tune.chosen >= 0 || me->tune.n == 0;
}

/* Step g: every micro-batch forward, loss, backward (buckets all-reduced as
 * backward fills them, on the last micro-batch), then the rest of the
 * buckets and, on loss steps, the loss; the optimizer once all are in.
 * Nothing here waits for the device: the GPU orders the collectives after
 * the gradients and the optimizer after the collectives.
 *
 * A graph step (rank_graph_step) is queued between backend_graph_begin and
 * _end, key the step's parity -- the parity of the staging slot, the meter's
 * record, the reducer's handles and the loss's pinned slot, so the pointers
 * the graph holds are the step's own -- from after the batch is staged (the
 * copy stream's work, outside) to the optimizer: forward, loss, backward,
 * the buckets' all-reduces on the comm stream (comm_nccl.c joins it to the
 * capture and back), the loss's all-reduce and the optimizer.  The loss is
 * fetched every such step, so every one queues the same work; the rows it
 * carries are written by the host into the step's pinned slot and uploaded
 * by the graph (global_loss.c). */
static int rank_step_queue(rank_t *me, long g, bool want_loss);

static int rank_step(rank_t *me, long g)
{
    bool graph = rank_graph_step(me, g);
    me->gkey = -1;
    /* the loss is a collective: fetched on the steps the schedule logs, the
     * same on every rank (and on every graph step: the same work each) */
    int rc = rank_step_queue(me, g, step_meter_logs(&me->meter) || graph);
    if (me->gkey >= 0) {
        int rc2 = backend_graph_end(me->be, me->gkey, rc == DDP_OK);
        if (rc == DDP_OK)
            rc = dev(me, rc2);
    }
    return rc;
}

static int rank_step_queue(rank_t *me, long g, bool want_loss)
{
    const config_t *cfg = me->cfg;
    backend_t *be = me->be;
    replica_t *rep = &me->rep;
    step_meter_t *m = &me->meter;

    fault_kind_t f = fault_at(me->rank, g);
    if (f == FAULT_ERROR)
        return err_set(me->err, DDP_ERR_RUNTIME, "injected fault at step %ld", g);
    fault_raise(f); /* kill, exit, stall: never returns */

    /* The step's loss is the mean over its rows on every rank together.  A
     * rank's share of them varies (86, 85, 85 rows; none once its shard is
     * used up), so each rank scales its sum by 1 / global rows and the
     * buckets are summed: every rank gets sum over all rows / global rows,
     * its gradient weighted by its share, with the mean's one division
     * folded in here, once (as in single mode). */
    size_t step_rows = schedule_step_rows(&me->sch, g), my_rows = schedule_view_rows(&me->sch, g);
    float scale = 1.0f / (float)step_rows;
    int nmicro, last_mi = last_micro(me, g, &nmicro);
    /* ZeRO-2 and -3: every rank runs every micro-batch (zero.h), the last
     * one reduce-scatters */
    bool sharded = cfg->zero >= 2;
    if (sharded)
        last_mi = cfg->accum - 1;
    bool has_grad = false, staged = false;
    global_loss_begin(&me->loss);
    straggle_begin(&me->slow);
    for (int mi = 0; mi <= last_mi; mi++) {
        int rows;
        const uint32_t *idx = schedule_micro(&me->sch, g, mi, &rows);
        bool last = mi == last_mi;
        if (rows == 0 && sharded) {
            /* no rows here: the others' gathers and reduce-scatters all the
             * same, with zero gradients (torch's Join, per micro-batch) */
            reducer_begin(&me->red, last, g);
            TRY(zero_skeleton(&me->zz, has_grad, me->err));
            step_meter_lap(m, PH_BACKWARD);
            has_grad = true;
            continue;
        }
        if (rows == 0)
            continue; /* a micro-batch too small to reach this rank */
        float *x, *y;
        TRY(dev(me, stager_stage(&me->stg, me->data, idx, rows, m, &x, &y)));
        staged = true;
        if (rank_graph_step(me, g)) { /* the rest of the step: one graph */
            TRY(dev(me, backend_graph_begin(be, (int)(g & 1))));
            me->gkey = (int)(g & 1);
        }
        TRY(straggle_before(&me->slow, x, rows, nmicro, !has_grad, me->err));
        TRY(dev(me, model_forward(rep, x, rows)));
        step_meter_lap(m, PH_FORWARD);
        TRY(dev(me, model_loss(rep, cfg->loss, y, rows, scale)));
        if (want_loss) /* the step's loss sum, on the device */
            TRY(global_loss_add(&me->loss, rep->loss_sum, me->err));
        step_meter_lap(m, PH_LOSS);
        TRY(straggle_after(&me->slow, x, rows, nmicro, me->err));
        /* no_sync on all but the last micro-batch: gradients only accumulate. */
        reducer_begin(&me->red, last, g);
        int rc = model_backward(rep, x, rows, rep->dout, has_grad, reducer_hook, &me->red);

        if (rc != DDP_OK) /* the hook's failure is the comm's, else the device's */
            return me->red.launch_failed ? coll(me, rc) : dev(me, rc);
        step_meter_lap(m, PH_BACKWARD);
        step_meter_rows(m, rows);
        has_grad = true;
    }
    straggle_end(&me->slow, has_grad);
    if (!staged && cfg->accum == 1) /* the staging slots keep the steps' parity */
        TRY(dev(me, stager_skip(&me->stg)));
    if (!has_grad) {
        /* No rows this step (its shard is used up, or the batch ended
         * before its turn): it still takes part in every all-reduce, with
         * zero gradients that add nothing to the sum (torch's Join hook
         * shadows the others' all-reduces the same way). */
        TRY(dev(me, backend_memset0(be, rep->grads, me->spec.nparams * sizeof(float))));
        step_meter_lap(m, PH_BACKWARD);
        reducer_begin(&me->red, true, g);
    }

    /* The rest of the buckets (all of them under --no-overlap), then, on
     * loss steps, the loss: the same sequence of collectives on every rank. */
    TRY(coll(me, reducer_launch_rest(&me->red)));
    if (want_loss)
        TRY(global_loss_reduce(&me->loss, g, my_rows, me->red.run_rest, me->err));
    /* The optimizer needs every bucket summed: its stream waits for all. */
    TRY(coll(me, comm_wait_all(me->comm)));
    /* --comm-hook: the gradients the optimizer applies, from what was sent
     * (16-bit: cast back; PowerSGD: its P and Q rounds), counted as exposed
     * communication like the wait */
    TRY(hooked(me, comm_hook_finish(me->red.hook, &me->red)));
    step_meter_lap(m, PH_COMM_EXPOSED);
    if (want_loss)
        global_loss_fetch(&me->loss, m);

    if (cfg->zero) {
        /* ZeRO-1 and -2: this rank steps its shard, and every bucket's
         * parameters are all-gathered; the next step's forward needs them
         * all.  ZeRO-3: its shard alone (its layers are gathered when they
         * compute). */
        if (sharded)
            TRY(zero_step(&me->zz, me->err));
        else
            TRY(zero1_step(&me->z, me->comm, rep->params, rep->grads, me->err));
        step_meter_lap(m, PH_OPTIM);
        TRY(coll(me, comm_wait_all(me->comm)));
        step_meter_lap(m, PH_COMM_EXPOSED);
    } else {
        TRY(dev(me, optim_step(&me->opt, rep->params, rep->grads)));
        step_meter_lap(m, PH_OPTIM);
    }
    return DDP_OK;
}

/* After step g, when a checkpoint is due: rank 0 writes it, then every rank
 * meets at a barrier. */
static int rank_checkpoint(rank_t *me, long g)
{
    if (!ckpt_run_due(&me->ck, &me->sch, g))
        return DDP_OK;
    /* Rank 0 writes: every rank holds the same parameters and optimizer
     * state (the same averaged gradients applied to the same start), so one
     * copy is the checkpoint.  The copies wait for its optimizer step, so
     * they hold the state after step g. */
    if (me->rank == 0) {
        /* A signal's default action must not cut the write in half (it would
         * leave a full-size temporary): one that comes meanwhile is
         * delivered when the file is complete and in place. */
        interrupt_hold(true);
        int wrc = ckpt_run_write(&me->ck, &me->sch, me->rep.params, &me->opt, g, me->err);
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
    double bytes = (double)me->spec.nparams * sizeof(float) * (1.0 + me->ck.nstate);
    double saved = comm_timeout(me->comm);
    comm_set_timeout(me->comm, saved + CKPT_WAIT_EXTRA_S + bytes / CKPT_WAIT_DISK_BPS);
    int rc = comm_barrier(me->comm);
    /* Why sync: under NCCL the barrier's wait is the GPU's and returns at
     * once; the host must wait here, while the longer bound holds (the watch
     * reads it), not in the next step under --timeout alone. */
    int drc = rc == DDP_OK ? backend_sync(me->be) : DDP_OK;
    comm_set_timeout(me->comm, saved);
    if (rc != DDP_OK)
        return coll(me, rc);
    return dev(me, drc); /* a watch failure carries the comm's message */
}

static int rank_train(rank_t *me)
{
    ddp_rank_rec_t *rec = me->rec;
    schedule_t *sch = &me->sch;
    step_meter_t *m = &me->meter;
    double t_start = now_s();
    for (long g = sch->start_step; g < sch->total_steps; g++) {
        bool active = schedule_rank_active(sch, g, me->rank);
        if (!active && !me->cfg->join) {
            /* --no-join: out of data, this rank leaves the loop, as a rank
             * whose DataLoader ends first does in PyTorch; the others will
             * wait for it in their next all-reduce until --timeout. */
            rec->left = true;
            rec->left_step = g;
            break;
        }
        TRY(rank_autotune_before(me, g));
        trainer_step_begin(m, sch, g);
        TRY(rank_step(me, g));
        TRY(step_meter_end(m, NULL, me->err));
        TRY(rank_autotune_after(me));
        if (active)
            rec->stats.steps_run++;
        else
            rec->stats.steps_shadowed++;
        TRY(rank_checkpoint(me, g));
    }
    TRY(step_meter_finish(m, me->err));
    rec->total_s = now_s() - t_start;

    /* Every rank's final parameters, checksummed so the supervisor can check
     * the replicas never drifted apart; rank 0's travel back in full. */
    float *host = ddp_area_params(me->area);
    float *mine = me->rank == 0 ? host : malloc(me->spec.nparams * sizeof(float));
    if (!mine)
        return err_set(me->err, DDP_ERR_RUNTIME, "out of memory for the final parameters");
    int rc = me->cfg->zero >= 3 ? zero_params_out(&me->zz, mine, me->err)
                                : dev(me, backend_d2h(me->be, mine, me->rep.params,
                                                      me->spec.nparams * sizeof(float)));
    if (rc == DDP_OK)
        rec->checksum = model_checksum(mine, me->spec.nparams);
    if (mine != host)
        free(mine);
    TRY(rc);
    rec->stats.mem_peak = backend_mem_peak(me->be);
    backend_mem_peak_split(me->be, rec->stats.mem_split);
    return DDP_OK;
}

int ddp_rank_run(const config_t *cfg, const dataset_t *data, const ddp_env_t *env)
{
    rank_t me;
    memset(&me, 0, sizeof me);
    me.cfg = cfg;
    me.data = data;
    me.env = env;
    me.rank = env->rank;
    me.world = env->world;
    me.area = env->area;
    me.rec = &me.area->rank[me.rank];
    me.rec->stats.device_id = cfg->gpus[me.rank];
    me.rec->state = RANK_RUNNING;
    /* set up by the supervisor; only this rank writes it */
    me.tr = ddp_area_trace(me.area, me.rank);
    me.tuned_g = -1;

    int rc = rank_setup(&me);
    if (rc == DDP_OK)
        rc = rank_train(&me);
    if (rc != DDP_OK) {
        /* Record why first, then abort the group: the supervisor reports the
         * first rank that aborted, with this message. */
        me.rec->rc = rc;
        snprintf(me.rec->msg, sizeof me.rec->msg, "%s", me.err[0] ? me.err : "unknown error");
        me.rec->state = RANK_FAILED;
        /* The graphs before the abort: NCCL aborts a communicator only once
         * no CUDA graph holds its collectives (the comm defers it till then,
         * and this abort is what releases NCCL's kernels that wait for a
         * peer, before the teardown's waits and frees). */
        if (me.be)
            backend_graph_reset(me.be);
        if (me.comm)
            comm_abort(me.comm, me.rec->msg);
        else if (env->seg) /* under mpirun the launcher ends the job instead */
            comm_seg_abort(env->seg, me.rank, me.rec->msg);
    } else {
        me.rec->state = RANK_DONE;
    }
    rank_teardown(&me); /* its meter erases the progress line: a fault must not leave half */
    return rc;
}
