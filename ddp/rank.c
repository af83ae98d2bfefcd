/* ddp/rank.c: one DDP rank, in its own forked process: its device, its
 * communicator, its shard of the data (DistributedSampler), a full replica
 * and optimizer, and the gradients averaged over ranks in buckets while
 * backward runs.  What it measured goes back to the supervisor through the
 * shared segment (ddp_shared.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_shared.h"
#include "fault.h"
#include "optim.h"
#include "reducer.h"
#include "trainer.h"

size_t ddp_area_layout(ddp_area_t *a, int world, long max_timed, long max_log, size_t nparams)
{
    size_t off = (sizeof(ddp_area_t) + 63) & ~(size_t)63;
    size_t steps = off;
    off += (size_t)world * (size_t)max_timed * sizeof(double);
    off = (off + 63) & ~(size_t)63;
    size_t log = off;
    off += (size_t)max_log * sizeof(loss_point_t);
    off = (off + 63) & ~(size_t)63;
    size_t params = off;
    off += nparams * sizeof(float);
    if (a) {
        a->world = world;
        a->max_timed = max_timed;
        a->max_log = max_log;
        a->nparams = nparams;
        a->off_steps = steps;
        a->off_log = log;
        a->off_params = params;
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
    float *host_params; /* rank 0's initial parameters */
    float *lossbuf;     /* device [2]: the step's loss sum and rows, all-reduced */
    float loss_host[2]; /* its host side (valid until the backend is synced) */
    char err[ERR_LEN];
} rank_t;

static int backend_failed(rank_t *k, int rc)
{
    return err_set(k->err, rc, "%s", backend_last_error(k->be));
}

static int comm_failed(rank_t *k, int rc)
{
    return err_set(k->err, rc, "%s", comm_last_error(k->comm));
}

#define TRY(call)                                                                          \
    do {                                                                                   \
        if ((rc = (call)) != DDP_OK)                                                       \
            return rc;                                                                     \
    } while (0)
#define TRY_BE(call)                                                                       \
    do {                                                                                   \
        if ((rc = (call)) != DDP_OK)                                                       \
            return backend_failed(k, rc);                                                  \
    } while (0)
#define TRY_COMM(call)                                                                     \
    do {                                                                                   \
        if ((rc = (call)) != DDP_OK)                                                       \
            return comm_failed(k, rc);                                                     \
    } while (0)

// ---------------------------------------------------------------------------
// setup: device, communicator, shard, replica, optimizer, initial parameters

static int rank_setup(rank_t *k)
{
    const config_t *cfg = k->cfg;
    int rc;
    int local_batch = cfg->batch / k->world;
    TRY(config_model_spec(cfg, &k->spec, k->err));
    /* The device is created here, after fork: CUDA does not survive fork. */
    TRY(backend_create(&k->be, cfg->backend, cfg->gpus[k->rank], 1, k->err));
    comm_args_t ca = {cfg->comm, k->world, k->rank, k->be, k->seg, cfg->timeout_s};
    TRY(comm_create(&k->comm, &ca, k->err));
    TRY(schedule_init(&k->sch, cfg, k->data, k->world, k->rank, local_batch, k->err));
    TRY(replica_init(&k->rep, k->be, &k->spec, local_batch, k->data->tgt_cols, k->err));
    TRY(optim_init(&k->opt, k->be, &cfg->optim, k->spec.nparams, k->err));
    TRY(reducer_init(&k->red, k->comm, &k->spec, k->rep.grads, cfg->first_bucket_mb,
                     cfg->bucket_mb, cfg->overlap, k->err));
    k->lossbuf = k->be->ops->alloc(k->be, 2 * sizeof(float));
    if (!k->lossbuf)
        return err_set(k->err, DDP_ERR_RUNTIME, "out of device memory");
    if (!k->be->host_visible) {
        size_t n = (size_t)local_batch * (k->data->in_dim + k->data->tgt_cols);
        k->staging = k->be->ops->alloc_host(k->be, n * sizeof(float));
        if (!k->staging)
            return err_set(k->err, DDP_ERR_RUNTIME, "out of pinned host memory");
    }
    /* Rank 0's initial parameters reach everyone by broadcast, as DDP's
     * constructor does (they are equal anyway when every rank uses --seed). */
    if (k->rank == 0) {
        k->host_params = malloc(k->spec.nparams * sizeof(float));
        if (!k->host_params)
            return err_set(k->err, DDP_ERR_RUNTIME, "out of memory for the parameters");
        TRY(trainer_initial_params(cfg, &k->spec, k->host_params, k->err));
        TRY_BE(k->be->ops->h2d(k->be, k->rep.params, k->host_params,
                               k->spec.nparams * sizeof(float)));
    }
    TRY_COMM(comm_broadcast(k->comm, k->rep.params, k->spec.nparams, 0));
    TRY_BE(k->be->ops->sync(k->be));
    return DDP_OK;
}

static void rank_teardown(rank_t *k)
{
    if (k->be) {
        if (k->staging)
            k->be->ops->free_host(k->be, k->staging);
        k->be->ops->free(k->be, k->lossbuf);
    }
    free(k->host_params);
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

static int rank_step(rank_t *k, long g, double *scratch, double *loss_out)
{
    const config_t *cfg = k->cfg;
    backend_t *be = k->be;
    replica_t *rep = &k->rep;
    ddp_rank_rec_t *rec = k->rec;
    int rc;

    fault_kind_t f = fault_at(k->rank, g);
    if (f == FAULT_ERROR)
        return err_set(k->err, DDP_ERR_RUNTIME, "injected fault at step %ld", g);
    fault_raise(f); /* kill, exit, stall: never returns */

    bool timed = schedule_timed(&k->sch, g);
    bool want_loss = schedule_logs(&k->sch, g);
    phase_clock_t pc;
    phase_clock_start(&pc, timed ? rec->stats.phase_s : scratch);
    double t0 = pc.last;
    size_t step_rows = schedule_step_rows(&k->sch, g);
    float scale = 1.0f / (float)step_rows; /* this rank's mean; the all-reduce averages ranks */
    int nmicro = micro_count(k, g);
    double step_loss = 0.0, bwd_t0 = 0.0, bwd_t1 = 0.0;
    float loss_sum = 0.0f;
    for (int m = 0; m < nmicro; m++) {
        int rows;
        const uint32_t *idx = schedule_micro(&k->sch, g, m, &rows);
        bool last = m == nmicro - 1;
        TRY_BE(trainer_stage_batch(rep, k->data, idx, rows, k->staging, &pc));
        TRY_BE(model_forward(rep, rep->x, rows));
        TRY_BE(be->ops->sync(be)); /* so the lap measures the work, not its launch */
        phase_clock_lap(&pc, PH_FORWARD);
        TRY_BE(model_loss(rep, cfg->loss, rep->y, rows, scale));
        if (want_loss) {
            TRY_BE(be->ops->d2h(be, &loss_sum, rep->loss_sum, sizeof loss_sum));
            step_loss += loss_sum;
        }
        TRY_BE(be->ops->sync(be));
        phase_clock_lap(&pc, PH_LOSS);
        /* no_sync on all but the last micro-batch: gradients only accumulate. */
        reducer_begin(&k->red, last);
        bwd_t0 = pc.last;
        rc = model_backward(rep, rep->x, rows, rep->dout, m > 0, reducer_hook, &k->red);
        if (rc != DDP_OK) /* the hook's failure is the comm's, else the device's */
            return k->red.launch_failed ? comm_failed(k, rc) : backend_failed(k, rc);
        TRY_BE(be->ops->sync(be));
        phase_clock_lap(&pc, PH_BACKWARD);
        bwd_t1 = pc.last;
        if (timed)
            rec->stats.rows += rows;
    }

    /* The rest of the buckets (all of them under --no-overlap), then, on
     * logging steps, the loss: the same sequence of collectives on every rank. */
    TRY_COMM(reducer_launch_rest(&k->red));
    if (want_loss) {
        k->loss_host[0] = (float)step_loss;
        k->loss_host[1] = (float)step_rows;
        TRY_BE(be->ops->h2d(be, k->lossbuf, k->loss_host, sizeof k->loss_host));
        TRY_COMM(comm_all_reduce_async(k->comm, k->lossbuf, 2, REDOP_SUM, "the loss", NULL));
    }
    /* The optimizer needs every bucket averaged: wait for all of them. */
    TRY_COMM(comm_wait_all(k->comm));
    TRY_BE(be->ops->sync(be));
    phase_clock_lap(&pc, PH_COMM_EXPOSED);
    pc.acc[PH_COMM_HIDDEN] += reducer_hidden_s(&k->red, bwd_t0, bwd_t1);
    if (want_loss) {
        float global[2];
        TRY_BE(be->ops->d2h(be, global, k->lossbuf, sizeof global));
        *loss_out = (double)global[0] / (double)global[1];
    }

    TRY_BE(optim_step(&k->opt, rep->params, rep->grads));
    TRY_BE(be->ops->sync(be));
    phase_clock_lap(&pc, PH_OPTIM);
    if (timed) {
        ddp_area_steps(k->area, k->rank)[rec->nstep_s++] = pc.last - t0;
        rec->timed_s += pc.last - t0;
        rec->timed_samples += (long)step_rows;
    }
    return DDP_OK;
}

static int rank_train(rank_t *k)
{
    int rc;
    ddp_rank_rec_t *rec = k->rec;
    double scratch[PH_COUNT] = {0};
    double t_start = now_s();
    for (long g = 0; g < k->sch.total_steps; g++) {
        double loss = 0.0;
        TRY(rank_step(k, g, scratch, &loss));
        if (schedule_logs(&k->sch, g)) {
            rec->final_loss = loss;
            long epoch = schedule_epoch_of(&k->sch, g);
            if (k->rank == 0) {
                if (rec->nlog < k->area->max_log)
                    ddp_area_log(k->area)[rec->nlog++] = (loss_point_t){g + 1, epoch, loss};
                trainer_log_loss(k->cfg, g + 1, k->sch.total_steps, epoch, loss);
            }
        }
    }
    rec->total_s = now_s() - t_start;

    /* Every rank's final parameters, checksummed so the supervisor can check
     * the replicas never drifted apart; rank 0's travel back in full. */
    float *host = ddp_area_params(k->area);
    float *mine = k->rank == 0 ? host : malloc(k->spec.nparams * sizeof(float));
    if (!mine)
        return err_set(k->err, DDP_ERR_RUNTIME, "out of memory for the final parameters");
    rc = k->be->ops->d2h(k->be, mine, k->rep.params, k->spec.nparams * sizeof(float));
    if (rc == DDP_OK)
        rec->checksum = model_checksum(mine, k->spec.nparams);
    if (mine != host)
        free(mine);
    if (rc != DDP_OK)
        return backend_failed(k, rc);
    rec->stats.mem_peak = k->be->mem_peak;
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
    rank_teardown(&k);
    return rc;
}
