/* ddp/rank.c: one DDP rank, in its own forked process: its device, its
 * communicator, its shard of the data (DistributedSampler), a full replica
 * and optimizer, and the gradients averaged over ranks in buckets while
 * backward runs.  What it measured goes back to the supervisor through the
 * shared segment (ddp_shared.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "data/schedule.h"
#include "ddp/ddp_shared.h"
#include "ddp/reducer.h"
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
        step_group_init(&a->steps, world);
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
    comm_seg_t *seg;
    int rank, world;
    ddp_area_t *area;
    ddp_rank_rec_t *rec;
    model_spec_t spec;
    backend_t *be;
    comm_t *comm;
    schedule_t sch;
    replica_t rep;
    optim_t opt;
    reducer_t red;
    float *staging;     /* batch staging for devices that are not host-visible */
    float *host_params; /* rank 0's initial parameters (every rank's with --resume) */
    float *lossbuf;     /* device [3]: the step's loss sum, rows and rank 0's progress
                           decision, all-reduced (see rank_step) */
    float loss_host[3]; /* its host side (valid until the backend is synced) */
    ckpt_run_t ck;      /* --resume (every rank) and --checkpoint (rank 0 writes) */
    trace_rec_t *tr;    /* --trace: this rank's recorder in the segment, or NULL */
    progress_t prog;    /* rank 0's progress line (off on the other ranks) */
    long progress_at;   /* the next step whose loss the progress line gets, -1 none */
    step_meter_t meter;
    char err[ERR_LEN];
} rank_t;

/* A call on the rank's device or communicator: a failure keeps their own
 * message (the supervisor names the rank and the device). */
static int dev(rank_t *k, int rc) { return backend_check(k->be, rc, NULL, k->err); }
static int coll(rank_t *k, int rc) { return comm_check(k->comm, rc, NULL, k->err); }

// ---------------------------------------------------------------------------
// setup: device, communicator, shard, replica, optimizer, initial parameters

static int rank_setup(rank_t *k)
{
    const config_t *cfg = k->cfg;
    int local_batch = cfg->batch / k->world;
    TRY(config_model_spec(cfg, &k->spec, k->err));
    /* The device is created here, after fork: CUDA does not survive fork. */
    TRY(backend_create(&k->be, cfg->backend, cfg->gpus[k->rank], 1, k->err));
    comm_args_t ca = {cfg->comm, k->world, k->rank, k->be, k->seg, cfg->timeout_s};
    TRY(comm_create(&k->comm, &ca, k->err));
    TRY(schedule_init(&k->sch, cfg, k->data, k->world, k->rank, local_batch, k->err));
    TRY(replica_init(&k->rep, k->be, &k->spec, local_batch, k->data->tgt_cols, k->err));
    TRY(optim_init(&k->opt, k->be, &cfg->optim, k->spec.nparams, k->err));
    TRY(ckpt_run_init(&k->ck, cfg, &k->spec, &k->opt, 0, k->err));
    TRY(reducer_init(&k->red, k->comm, &k->spec, k->rep.grads, cfg->first_bucket_mb,
                     cfg->bucket_mb, cfg->overlap, k->err));
    k->lossbuf = backend_alloc(k->be, 3 * sizeof(float));
    if (!k->lossbuf)
        return err_set(k->err, DDP_ERR_RUNTIME, "out of device memory");
    if (!backend_host_visible(k->be)) {
        size_t n = (size_t)local_batch * (k->data->in_dim + k->data->tgt_cols);
        k->staging = backend_alloc_host(k->be, n * sizeof(float));
        if (!k->staging)
            return err_set(k->err, DDP_ERR_RUNTIME, "out of pinned host memory");
    }
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

    /* Every rank keeps its own phases and posts its step times to the group
     * (which takes a step's slowest rank); rank 0 also the loss log, the
     * progress line and --explain's story.  All of it lives in the shared area. */
    ddp_rank_rec_t *rec = k->rec;
    if (k->rank == 0)
        rec->log = (loss_log_t){.pt = ddp_area_log(k->area), .cap = k->area->max_log,
                                .fixed = true};
    step_meter_init(&k->meter, &(step_meter_sinks_t){
                                   .cfg = cfg,
                                   .dev = &rec->stats,
                                   .trace = k->tr,
                                   .group = &k->area->steps,
                                   .keeper = k->rank,
                                   .log = k->rank == 0 ? &rec->log : NULL,
                                   .final_loss = &rec->final_loss,
                                   .story = k->rank == 0 ? &k->area->story : NULL,
                                   .progress = k->rank == 0 ? &k->prog : NULL,
                               });
    return DDP_OK;
}

static void rank_teardown(rank_t *k)
{
    if (k->be) {
        if (k->staging)
            backend_free_host(k->be, k->staging);
        backend_free(k->be, k->lossbuf);
    }
    free(k->host_params);
    ckpt_run_free(&k->ck);
    reducer_free(&k->red);
    optim_free(&k->opt);
    replica_free(&k->rep);
    schedule_free(&k->sch);
    comm_destroy(k->comm);
    backend_destroy(k->be);
}

// ---------------------------------------------------------------------------
// training

/* Micro-batches in step g (the epoch's last step may have fewer). */
static int micro_count(rank_t *k, long g)
{
    int n = 0;
    for (int m = 0; m < k->cfg->accum; m++) {
        int rows;
        schedule_micro(&k->sch, g, m, &rows);
        if (rows == 0)
            break;
        n++;
    }
    return n;
}

/* --explain, rank 0, the run's first step: the buckets as they ran, timed
 * from the start of the backward pass that all-reduced them. */
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

/* Step g: every micro-batch forward, loss, backward (buckets all-reduced as
 * backward fills them, on the last micro-batch), then the rest of the
 * buckets and, on loss steps, the loss; the optimizer once all are in.
 * *loss_out gets the global mean loss when want_loss, else NAN. */
static int rank_step(rank_t *k, long g, bool want_loss, double *loss_out)
{
    const config_t *cfg = k->cfg;
    backend_t *be = k->be;
    replica_t *rep = &k->rep;
    step_meter_t *m = &k->meter;

    fault_kind_t f = fault_at(k->rank, g);
    if (f == FAULT_ERROR)
        return err_set(k->err, DDP_ERR_RUNTIME, "injected fault at step %ld", g);
    fault_raise(f); /* kill, exit, stall: never returns */

    size_t step_rows = schedule_step_rows(&k->sch, g);
    float scale = 1.0f / (float)step_rows; /* this rank's mean; the all-reduce averages ranks */
    int nmicro = micro_count(k, g);
    double step_loss = 0.0, bwd_t0 = 0.0, bwd_t1 = 0.0;
    for (int mi = 0; mi < nmicro; mi++) {
        int rows;
        const uint32_t *idx = schedule_micro(&k->sch, g, mi, &rows);
        bool last = mi == nmicro - 1;
        TRY(dev(k, stage_batch(rep, k->data, idx, rows, k->staging, m)));
        TRY(dev(k, model_forward(rep, rep->x, rows)));
        TRY(dev(k, backend_sync(be))); /* so the lap measures the work, not its launch */
        step_meter_lap(m, PH_FORWARD);
        TRY(dev(k, model_loss(rep, cfg->loss, rep->y, rows, scale)));
        if (want_loss) {
            float sum = 0.0f;
            TRY(dev(k, backend_d2h(be, &sum, rep->loss_sum, sizeof sum)));
            step_loss += sum;
        }
        TRY(dev(k, backend_sync(be)));
        bwd_t0 = step_meter_lap(m, PH_LOSS);
        /* no_sync on all but the last micro-batch: gradients only accumulate. */
        reducer_begin(&k->red, last);
        int rc = model_backward(rep, rep->x, rows, rep->dout, mi > 0, reducer_hook, &k->red);
        if (rc != DDP_OK) /* the hook's failure is the comm's, else the device's */
            return k->red.launch_failed ? coll(k, rc) : dev(k, rc);
        TRY(dev(k, backend_sync(be)));
        bwd_t1 = step_meter_lap(m, PH_BACKWARD);
        step_meter_rows(m, rows);
    }

    /* The rest of the buckets (all of them under --no-overlap), then, on
     * loss steps, the loss: the same sequence of collectives on every rank. */
    TRY(coll(k, reducer_launch_rest(&k->red)));
    if (want_loss) {
        k->loss_host[0] = (float)step_loss;
        k->loss_host[1] = (float)step_rows;
        /* Rank 0's decision (the others add 0): in how many steps the
         * progress line next wants a loss; 0 when it is off.  A small whole
         * number, exact in a float. */
        k->loss_host[2] = k->rank == 0 ? (float)progress_steps_to_due(&k->prog) : 0.0f;
        TRY(dev(k, backend_h2d(be, k->lossbuf, k->loss_host, sizeof k->loss_host)));
        TRY(coll(k, comm_all_reduce_async(k->comm, k->lossbuf, 3, REDOP_SUM, "the loss", NULL)));
    }
    /* The optimizer needs every bucket averaged: wait for all of them. */
    TRY(coll(k, comm_wait_all(k->comm)));
    TRY(dev(k, backend_sync(be)));
    step_meter_lap(m, PH_COMM_EXPOSED);
    step_meter_charge(m, PH_COMM_HIDDEN, reducer_hidden_s(&k->red, bwd_t0, bwd_t1));
    for (int i = 0; i < k->red.nb && k->tr; i++) {
        const bucket_t *b = &k->red.b[i];
        if (b->span.end_s > 0.0)
            trace_event(k->tr, TR_ALLREDUCE, LANE_COMM, b->span.start_s, b->span.end_s,
                        (uint64_t)b->count * sizeof(float), i, -1);
    }
    *loss_out = NAN;
    if (want_loss) {
        float global[3];
        TRY(dev(k, backend_d2h(be, global, k->lossbuf, sizeof global)));
        *loss_out = (double)global[0] / (double)global[1];
        long ahead = (long)global[2];
        k->progress_at = ahead > 0 ? g + ahead : -1;
    }

    TRY(dev(k, optim_step(&k->opt, rep->params, rep->grads)));
    TRY(dev(k, backend_sync(be)));
    step_meter_lap(m, PH_OPTIM);
    if (m->first && k->rank == 0) { /* --explain: what step 1 moved */
        step_story_t *st = &k->area->story;
        move_stat_t *mb = &st->move[MOVE_BATCH];
        /* every rank gathers its own shard, in parallel: rank 0's time
         * (its seconds once the meter has closed the step, in rank_train) */
        mb->bytes = (uint64_t)m->rows * (uint64_t)k->world *
                    (uint64_t)(k->data->in_dim + k->data->tgt_cols) * sizeof(float);
        mb->ops = nmicro * k->world;
        story_buckets(k, bwd_t0, bwd_t1);
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
     * copy is the checkpoint.  Its optimizer step was synced, so the copy is
     * the state after step g. */
    if (k->rank == 0)
        TRY(ckpt_run_write(&k->ck, &k->sch, k->rep.params, &k->opt, g, k->err));
    /* Barrier: nobody runs ahead while rank 0 writes.  Without it the others
     * would wait for rank 0 inside step g+1's first all-reduce, bounded by
     * --timeout, which a slow disk could exceed; and after the last step
     * they would exit while the last checkpoint is still being written.  So
     * this one wait allows for the write: --timeout plus 30 s plus the file
     * at 20 MB/s.  Every op before it was waited for (rank_step's wait_all),
     * so the comm is idle and the timeout may change (comm.h). */
    double bytes = (double)k->spec.nparams * sizeof(float) * (1.0 + k->ck.nstate);
    double saved = comm_timeout(k->comm);
    comm_set_timeout(k->comm, saved + 30.0 + bytes / 20e6);
    int rc = comm_barrier(k->comm);
    comm_set_timeout(k->comm, saved);
    return coll(k, rc);
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
         * come from rank 0 on the previous loss all-reduce (progress_at), so
         * no rank decides alone from its own clock. */
        bool logs = schedule_logs(sch, g);
        bool want_loss = logs || g == k->progress_at;
        bool first = g == sch->start_step; /* --explain narrates this run's first step */
        long rows = (long)schedule_step_rows(sch, g);
        double loss = NAN;
        step_meter_begin(m, g, schedule_timed(sch, g), first);
        TRY(rank_step(k, g, want_loss, &loss));
        step_meter_end(m, rows);
        if (first && k->rank == 0)
            k->area->story.move[MOVE_BATCH].seconds =
                rec->stats.first_phase_s[PH_DATA] + rec->stats.first_phase_s[PH_H2D];
        TRY(step_meter_loss(m, g, sch->total_steps, schedule_epoch_of(sch, g), logs, loss,
                            rows * k->world, k->err));
        TRY(rank_checkpoint(k, g));
    }
    progress_end(&k->prog);
    rec->total_s = now_s() - t_start;

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
    return DDP_OK;
}

int ddp_rank_run(const config_t *cfg, const dataset_t *data, comm_seg_t *seg, int rank)
{
    rank_t k;
    memset(&k, 0, sizeof k);
    k.cfg = cfg;
    k.data = data;
    k.seg = seg;
    k.rank = rank;
    k.world = cfg->ngpus;
    k.area = comm_seg_extra(seg);
    k.rec = &k.area->rank[rank];
    k.rec->stats.device_id = cfg->gpus[rank];
    k.rec->state = RANK_RUNNING;
    k.tr = ddp_area_trace(k.area, rank); /* set up by the supervisor; only this rank writes it */

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
        else
            comm_seg_abort(seg, rank, k.rec->msg);
    } else {
        k.rec->state = RANK_DONE;
    }
    progress_end(&k.prog); /* a fault must not leave a half line on the terminal */
    rank_teardown(&k);
    return rc;
}
