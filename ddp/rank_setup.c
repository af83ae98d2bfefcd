/* ddp/rank_setup.c: what a DDP rank is made of, in the order it is made (its device after
 * fork: CUDA does not survive fork), and its teardown. */
#include <stdio.h>
#include <stdlib.h>

#include "common/base/clock.h"
#include "common/train/trainer.h"
#include "ddp/fingerprint.h"
#include "ddp/rank.h"

static int dev(rank_t *me, int rc) { return backend_check(me->be, rc, NULL, me->err); }

/* The step meter's callback once step r->g has run: the buckets' communication hidden
 * behind the last backward, their bytes and times, and their --trace events. */
static void rank_resolved(void *ctx, step_meter_t *m, step_rec_t *r)
{
    (void)m;
    rank_t *me = ctx;
    double b0, b1;
    shard_backward(me->shard, r, &b0, &b1);
    r->charge[PH_COMM_HIDDEN] += reducer_spans(&me->red, r, b0, b1);
    reducer_record(&me->red, r->timed, &me->rec->nbuckets, me->rec->bucket_bytes,
                   me->rec->bucket_s, ddp_area_trace(me->env->area, me->rank));
}

/* The device, the communicator, every rank on the same job. */
static int rank_connect(rank_t *me)
{
    const config_t *cfg = me->cfg;
    const ddp_env_t *env = me->env;
    TRY(backend_create(&me->be, cfg->backend, cfg->gpus[me->rank], 1, me->err));
    TRY(dev(me, backend_set_precision(me->be, cfg->precision)));
    comm_args_t ca = {cfg->comm, me->world, me->rank, me->be, env->seg, cfg->timeout_s, 0.0,
                      env->exchange, NULL};
    TRY(comm_create(&me->comm, &ca, me->err));
    /* Every rank on the same job before anything trains (under mpirun the launcher checked). */
    if (cfg->launcher == LAUNCHER_MPI)
        return DDP_OK;
    static fingerprint_t fp; /* 3 KiB: off the stack */
    fingerprint_make(&fp, cfg, me->data);
    return ddp_fingerprint_check(me->comm, me->be, &fp, cfg->gpus, me->err);
}

/* Its replica (a micro-batch's ceil((B - rank) / world) rows, at least 1 row of room) and
 * what it holds; on shm or MPI over host buffers what backward leaves runs on this thread
 * (run_rest: a hand-off would cost two wake-ups and overlap nothing). */
static int rank_model(rank_t *me)
{
    const config_t *cfg = me->cfg;
    int local_batch = (cfg->batch - me->rank + me->world - 1) / me->world;
    if (local_batch < 1)
        local_batch = 1;
    TRY(replica_init_sharded(&me->rep, me->be, &me->spec, local_batch, me->data->tgt_cols,
                             shard_replica_skip(cfg), me->err));
    TRY(stager_init(&me->stg, me->be, me->rep.x, me->rep.y, local_batch, cfg->accum, me->data,
                    me->err));
    TRY(reducer_init(&me->red, me->comm, &me->meter, &me->spec, me->rep.grads, cfg->first_bucket_mb,
                     cfg->bucket_mb, cfg->overlap, shard_bucket_unit(cfg->zero), me->err));
    comm_kind_t kind = comm_resolve(cfg->comm, cfg->backend);
    me->red.run_rest = (kind == COMM_SHM || kind == COMM_MPI) && backend_host_visible(me->be);
    TRY(shard_create(&me->shard, cfg, me->be, me->comm, &me->rep, &me->red, &me->meter, me->err));
    return comm_hook_init(&me->hook, cfg, me->be, &me->red, me->err);
}

/* Rank 0's initial parameters reach everyone by broadcast, as DDP's constructor does.
 * --resume: every rank reads the same file (optimizer state, first step). */
static int rank_params(rank_t *me, double *broadcast_s)
{
    const config_t *cfg = me->cfg;
    float *host = NULL;
    if ((me->rank == 0 || cfg->resume_path[0]) &&
        !(host = malloc(me->spec.nparams * sizeof(float))))
        return err_set(me->err, DDP_ERR_RUNTIME, "out of memory for the parameters");
    int rc = me->rank == 0 ? trainer_initial_params(cfg, &me->spec, host, me->err) : DDP_OK;
    if (rc == DDP_OK)
        rc = ckpt_run_resume(&me->ck, &me->sch, host, shard_optim(me->shard), me->err);
    if (me->rank == 0)
        me->env->area->start_step = me->sch.start_step;
    double t0 = now_s();
    if (rc == DDP_OK)
        rc = shard_params_in(me->shard, host, me->err);
    if (rc == DDP_OK)
        rc = dev(me, backend_sync(me->be));
    *broadcast_s = now_s() - t0;
    free(host);
    return rc;
}

int rank_setup(rank_t *me)
{
    const config_t *cfg = me->cfg;
    ddp_rank_rec_t *rec = me->rec;
    bool rank0 = me->rank == 0;
    TRY(config_model_spec(cfg, &me->spec, me->err));
    TRY(rank_connect(me));
    TRY(schedule_init(&me->sch, cfg, me->data, me->world, me->rank, me->err));
    TRY(rank_model(me));
    TRY(ckpt_run_init(&me->ck, cfg, &me->spec, shard_optim(me->shard), 0, me->err));
    if (cfg->bucket_auto) {
        autotune_init(&me->tune, &me->spec, cfg->first_bucket_mb, me->sch.start_step,
                      schedule_warmup(&me->sch));
        TRY(autotune_alloc(&me->tune, me->be, me->err));
    }
    TRY(global_loss_init(&me->loss, me->be, me->comm, &me->meter, me->err));
    straggle_init(&me->slow, cfg, me->rank, me->be, &me->rep, &me->meter);
    TRY(watch_init(&me->watch, cfg, me->comm, &me->rep, &me->sch,
                   rank0 ? &me->env->area->replicas : NULL, &rec->stats, me->err));
    /* Before anything is captured, every rank together: whether NCCL
     * captures at all (graph.h's probe, shared with DP). */
    bool graphs = config_graphs_on(cfg, MODE_DDP);
    char place[64];
    snprintf(place, sizeof place, "rank %d (device %d)", me->rank, cfg->gpus[me->rank]);
    TRY(graph_probe(cfg, comm_resolve(cfg->comm, cfg->backend) == COMM_NCCL ? me->comm : NULL,
                    place, "every rank", &graphs, rec->graph_refused, me->err));
    TRY(graph_init(&me->graph, graphs, me->be, &me->meter, NULL, me->sch.start_step, NULL, 0,
                   me->err));
    double broadcast_s = 0.0;
    TRY(rank_params(me, &broadcast_s));
    me->t = (train_step_t){.be = me->be, .rep = &me->rep, .meter = &me->meter, .loss = cfg->loss,
                           .stg = &me->stg, .data = me->data, .graph = &me->graph,
                           .comm = me->comm, .comm_failed = &me->red.launch_failed,
                           .before_forward = straggle_before, .after_loss = straggle_after,
                           .extra_ctx = &me->slow, .loss_sum = global_loss_add,
                           .loss_ctx = &me->loss, .err = me->err};
    TRY(plant_install(&me->plant, cfg, me->rank, &me->t, &me->red, &me->sch, me->err));

    /* Every rank keeps its own phases and step times; rank 0 also the loss log, the
     * progress line and --explain's story, all but the line in the area. */
    ddp_area_t *area = me->env->area;
    if (rank0)
        rec->log = (loss_log_t){.pt = ddp_area_log(area), .cap = area->max_log, .fixed = true};
    step_meter_sinks_t sinks = {
        .cfg = cfg, .dev = &rec->stats, .trace = ddp_area_trace(area, me->rank),
        .times = &rec->times, .log = rank0 ? &rec->log : NULL, .final_loss = &rec->final_loss,
        .story = rank0 ? &area->story : NULL, .stagers = me->world, /* each stages its rows */
        .progress = rank0 ? "ddp" : NULL, .total_steps = me->sch.total_steps, .be = me->be,
        .spec = &me->spec, .optim = shard_optim(me->shard), .resolved = rank_resolved, .ctx = me};
    TRY(step_meter_init(&me->meter, &sinks, me->err));
    /* --explain: the initial parameters' broadcast, once before the steps */
    step_meter_moved(&me->meter, MOVE_BROADCAST, me->spec.nparams * sizeof(float), broadcast_s);
    return DDP_OK;
}

void rank_teardown(rank_t *me)
{
    /* The graphs first, before anything waits for the device: dropping
     * them carries out a deferred abort of the communicator (graph.h),
     * which releases NCCL's kernels that wait for a peer. */
    graph_abandon(&me->graph);
    stager_free(&me->stg);
    global_loss_free(&me->loss); /* waits for the device: no copy still uses them */
    autotune_free(&me->tune, me->be);
    watch_free(me->watch);
    step_meter_free(&me->meter);
    ckpt_run_free(&me->ck);
    shard_free(me->shard);
    comm_hook_free(me->hook);
    plant_free(me->plant);
    reducer_free(&me->red);
    replica_free(&me->rep);
    schedule_free(&me->sch);
    graph_free(&me->graph);
    comm_destroy(me->comm);
    backend_destroy(me->be);
}
