/* ddp/rank.c: one DDP rank, in its own process (forked, or started by mpirun): its loop and,
 * fenced, its training step; its set-up is rank_setup.c's.  On a GPU the host only queues a
 * step: the buckets' waits are the GPU's (comm.h), the loss is fetched without waiting, and
 * the step meter's wait for the previous step is the step's one host synchronisation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/fault.h"
#include "common/base/interrupt.h"
#include "common/train/trainer.h"
#include "ddp/rank.h"

/* The checkpoint barrier's allowance beyond --timeout for rank 0's write: a fixed margin,
 * and the file at a slow disk's speed (bytes/s). */
#define CKPT_WAIT_EXTRA_S 30.0
#define CKPT_WAIT_DISK_BPS 20e6

static int coll(rank_t *me, int rc) { return comm_check(me->comm, rc, NULL, me->err); }

/* The end of a step's backward: what its micro-batches leave, the rest of the buckets and,
 * on the steps that log it, the loss (the same collectives on every rank); then the wait
 * for every bucket and the gradients the optimizer applies, as exposed communication. */
static int rank_reduce(rank_t *me, long g)
{
    char none[256];
    if (reducer_unready(&me->red, none, sizeof none))
        return err_set(me->err, DDP_ERR_RUNTIME, "step %ld: backward gave %s no gradient on this "
                       "rank: they took no part in its loss, and every rank must all-reduce "
                       "every bucket", g + 1, none);
    straggle_end(&me->slow, me->t.has_grad);
    if (!me->t.staged && me->cfg->accum == 1) /* the staging slots keep the steps' parity */
        TRY(step_check(&me->t, stager_skip(&me->stg), "h2d"));
    TRY(coll(me, reducer_launch_rest(&me->red)));
    bool want_loss = step_meter_logs(&me->meter);
    if (want_loss)
        TRY(global_loss_reduce(&me->loss, g, schedule_view_rows(&me->sch, g), me->red.run_rest,
                               me->err));
    /* The optimizer needs every bucket summed: its stream waits for all. */
    TRY(coll(me, comm_wait_all(me->comm)));
    int rc = reducer_finish(&me->red);
    /* a hook's failure: the communicator's message when it failed, else the device's */
    if (rc != DDP_OK)
        return strcmp(comm_last_error(me->comm), "unknown error")
                   ? coll(me, rc)
                   : backend_check(me->be, rc, NULL, me->err);
    step_meter_lap(&me->meter, PH_COMM_EXPOSED);
    if (want_loss)
        global_loss_fetch(&me->loss);
    return DDP_OK;
}

// ---- TRAINING STEP BEGIN ----------------------------------------------------

/* Step g on this rank: every micro-batch forward, loss and backward, each bucket's
 * all-reduce launched as soon as backward has filled it (no_sync but on the last), then the
 * wait and the optimizer.  Each rank scales its loss by 1 / global rows (docs/modes.md). */
static int ddp_step(rank_t *me, long g)
{
    train_step_t *t = &me->t;
    float scale = 1.0f / (float)schedule_step_rows(&me->sch, g);
    int last = shard_last_micro(me->shard, &me->sch, g);
    for (int mi = 0; mi <= last; mi++) {
        int rows;
        const uint32_t *idx = schedule_micro(&me->sch, g, mi, &rows);
        reducer_begin(&me->red, mi == last, g); /* no_sync but on the last */
        if (rows == 0) { /* none here: the others' collectives all the same (Join) */
            TRY(shard_no_rows(me->shard, mi == last, t));
            continue;
        }
        float *x, *y;
        TRY(step_stage(t, idx, rows, &x, &y));
        TRY(step_forward(t, x, rows));
        TRY(step_loss(t, y, rows, scale));
        TRY(step_backward(t, x, rows, reducer_hook, &me->red));
    }
    TRY(rank_reduce(me, g));
    return shard_step(me->shard, me->err);
}

// ---- TRAINING STEP END ------------------------------------------------------

/* Around the step: an injected fault, and --cuda-graph.  A graph step is the same on every
 * rank (all of it from the schedule and the options): a full step with the buckets settled
 * (--bucket-mb auto's new cap drops the graphs); the loss is fetched on every graph step. */
static int rank_step(rank_t *me, long g)
{
    fault_kind_t f = fault_at(me->rank, g);
    if (f == FAULT_ERROR)
        return err_set(me->err, DDP_ERR_RUNTIME, "injected fault at step %ld", g);
    fault_raise(f); /* kill, exit, stall: never returns */
    bool settled = !me->cfg->bucket_auto || me->tune.chosen >= 0 || me->tune.n == 0;
    graph_arm(&me->graph, g, schedule_full_step(&me->sch, g) && settled);
    step_begin(&me->t);
    global_loss_begin(&me->loss);
    straggle_begin(&me->slow, &me->sch, g);
    return graph_close(&me->graph, ddp_step(me, g), me->err);
}

/* After step g, when a checkpoint is due: rank 0 writes it, then every rank meets. */
static int rank_checkpoint(rank_t *me, long g)
{
    if (!ckpt_run_due(&me->ck, &me->sch, g))
        return DDP_OK;
    /* Rank 0 writes: every rank holds the same state, so one copy is the checkpoint. */
    if (me->rank == 0) {
        /* A signal meanwhile must not cut the write in half: it is delivered once the file
         * is complete and in place. */
        interrupt_hold(true);
        int wrc = ckpt_run_write(&me->ck, &me->sch, me->rep.params, shard_optim(me->shard), g,
                                 me->err);
        interrupt_hold(false);
        TRY(wrc);
    }
    /* Barrier: nobody runs ahead while rank 0 writes (they would wait in step g+1's first
     * all-reduce under --timeout, which a slow disk could exceed, or exit mid-write), so this
     * one wait allows for the write.  Every op before it was waited for, so no op is
     * launched that reads the timeout before it changes (comm.h). */
    double bytes = (double)me->spec.nparams * sizeof(float) * (1.0 + me->ck.nstate);
    double saved = comm_timeout(me->comm);
    comm_set_timeout(me->comm, saved + CKPT_WAIT_EXTRA_S + bytes / CKPT_WAIT_DISK_BPS);
    int rc = comm_barrier(me->comm);
    /* Why sync: under NCCL the barrier's wait is the GPU's; the host must wait here, while
     * the longer bound holds, not in the next step under --timeout alone. */
    int drc = rc == DDP_OK ? backend_sync(me->be) : DDP_OK;
    comm_set_timeout(me->comm, saved);
    if (rc != DDP_OK)
        return coll(me, rc);
    return backend_check(me->be, drc, NULL, me->err); /* a watch failure: the comm's message */
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
            /* --no-join: out of data, it leaves the loop as a rank whose DataLoader ends
             * first does in PyTorch; the others wait for it until --timeout. */
            rec->left = true;
            rec->left_step = g;
            break;
        }
        TRY(rank_autotune_before(me, g));
        trainer_step_begin(m, sch, g);
        TRY(rank_step(me, g));
        TRY(step_meter_end(m, NULL, me->err));
        if (me->watch)
            TRY(watch_step(me->watch, g, me->err));
        TRY(rank_autotune_after(me));
        if (active)
            rec->stats.steps_run++;
        else
            rec->stats.steps_shadowed++;
        TRY(rank_checkpoint(me, g));
    }
    TRY(step_meter_finish(m, me->err));
    rec->total_s = now_s() - t_start;

    /* Every rank's final parameters, checksummed (the replicas must never drift apart);
     * rank 0's travel back in full. */
    float *host = ddp_area_params(me->env->area);
    float *mine = me->rank == 0 ? host : malloc(me->spec.nparams * sizeof(float));
    if (!mine)
        return err_set(me->err, DDP_ERR_RUNTIME, "out of memory for the final parameters");
    int rc = shard_params_out(me->shard, mine, me->err);
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
    rank_t me = {.cfg = cfg, .data = data, .env = env, .rank = env->rank, .world = env->world,
                  .rec = &env->area->rank[env->rank]};
    me.rec->stats.device_id = cfg->gpus[me.rank];
    me.rec->state = RANK_RUNNING;
    int rc = rank_setup(&me);
    if (rc == DDP_OK)
        rc = rank_train(&me);
    /* (NCCL's abort waits until no CUDA graph holds the communicator: graph_abandon, first
     * in the teardown, releases it.) */
    ddp_rank_end(env, me.comm, rc, me.err);
    rank_teardown(&me); /* its meter erases the progress line: a fault must not leave half */
    return rc;
}
