/* ddp/watch.c: --check-replicas and a scenario's watch on a DDP rank,
 * between its steps (see watch.h). */
#include "ddp/watch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/fault.h"
#include "common/base/hash.h"

struct watch {
    const config_t *cfg;
    comm_t *comm;
    backend_t *be;
    replica_t *rep;
    schedule_t *sch;
    replica_rec_t *rec;     /* rank 0's record of the checks; NULL elsewhere */
    device_stats_t *stats;
    int rank, world;
    size_t n;               /* parameters */
    float *host;            /* their host copy (NULL: the device's are host memory) */
    float *fp;              /* device: 4 floats a rank, every rank's (all-gathered) */
    float *ref, *ref_host;  /* a difference's: rank 0's parameters, here and on the host */
    uint64_t *seen;         /* WATCH_BATCHES: each micro-batch's samples an epoch before */
};

static int dev(watch_t *w, int rc, char *err) { return backend_check(w->be, rc, NULL, err); }
static int coll(watch_t *w, int rc, char *err) { return comm_check(w->comm, rc, NULL, err); }

int watch_init(watch_t **out, const config_t *cfg, comm_t *comm, replica_t *rep,
               schedule_t *sch, replica_rec_t *rec, device_stats_t *stats, char *err)
{
    *out = NULL;
    if (!cfg->check_replicas && !cfg->watch)
        return DDP_OK;
    watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for --check-replicas");
    *w = (watch_t){.cfg = cfg, .comm = comm, .be = rep->be, .rep = rep, .sch = sch, .rec = rec,
                   .stats = stats, .rank = comm_rank(comm), .world = comm_world(comm),
                   .n = rep->spec->nparams};
    size_t micro = (size_t)sch->steps_per_epoch * (size_t)cfg->accum;
    *out = w;
    if ((!backend_host_visible(w->be) && !(w->host = malloc(w->n * sizeof(float)))) ||
        !(w->fp = backend_alloc_for(w->be, 4 * (size_t)w->world * sizeof(float), MEM_COMM)) ||
        ((cfg->watch & WATCH_BATCHES) && !(w->seen = calloc(micro, sizeof *w->seen))))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for --check-replicas");
    return DDP_OK;
}

void watch_free(watch_t *w)
{
    if (!w)
        return;
    backend_free(w->be, w->fp);
    backend_free(w->be, w->ref);
    free(w->host);
    free(w->ref_host);
    free(w->seen);
    free(w);
}

/* src (device) on the host: *out is src itself, or its copy in host. */
static int on_host(watch_t *w, const float *src, float *host, const float **out, char *err)
{
    *out = host ? host : src;
    return host ? dev(w, backend_d2h(w->be, host, src, w->n * sizeof *host), err) : DDP_OK;
}

/* Every rank's 4 floats v, rank q's at all + 4q (host).  Whole numbers
 * below 2^24 and the distances travel exactly, whatever the transport. */
static int exchange(watch_t *w, const float v[4], float *all, char *err)
{
    TRY(dev(w, backend_h2d(w->be, w->fp + 4 * w->rank, v, 4 * sizeof *v), err));
    TRY(coll(w, comm_all_gather(w->comm, NULL, w->fp, 4), err));
    return dev(w, backend_d2h(w->be, all, w->fp, 4 * (size_t)w->world * sizeof *all), err);
}

/* The hashes differ: rank 0's parameters reach every rank (a broadcast from
 * its own arena), each rank's difference from them reaches every rank; then
 * the run stops, naming the lowest rank that differs (a scenario's watch
 * records the distance and goes on). */
static int differ(watch_t *w, long g, const float *mine, float *all, char *err)
{
    size_t bytes = w->n * sizeof(float);
    if ((!w->ref && !(w->ref = backend_alloc_for(w->be, bytes, MEM_COMM))) ||
        (w->host && !w->ref_host && !(w->ref_host = malloc(bytes))))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for --check-replicas");
    float *buf = w->rank == 0 ? w->rep->params : w->ref;
    TRY(coll(w, comm_broadcast(w->comm, buf, w->n, 0), err));
    const float *ref = mine;
    if (w->rank > 0)
        TRY(on_host(w, buf, w->host ? w->ref_host : NULL, &ref, err));
    int p;
    double dp, dist = model_diff(w->rep->spec, ref, mine, &p, &dp);
    TRY(exchange(w, (float[4]){(float)p, (float)dp, (float)dist, 0.0f}, all, err));
    int first = -1;
    double far = 0.0;
    char ranks[128] = "";
    for (int q = 1; q < w->world; q++) {
        if (all[4 * q] < 0)
            continue;
        first = first < 0 ? q : first;
        far = fmax(far, all[4 * q + 2]);
        size_t u = strlen(ranks);
        snprintf(ranks + u, sizeof ranks - u, "%s%d", u ? ", " : "", q);
    }
    if (first < 0)
        return DDP_OK; /* cannot be: equal bits hash alike */
    if (w->rec)
        replica_rec_add(w->rec, g, far, true);
    if (w->cfg->watch & WATCH_REPLICAS)
        return DDP_OK;
    char name[32];
    return err_set(err, DDP_ERR_RUNTIME,
                   "the replicas differ after step %ld (--check-replicas %d): rank %d's %s is up "
                   "to %.3g from rank 0's (the whole model up to %.3g); ranks that differ from "
                   "rank 0: %s",
                   g + 1, w->cfg->check_replicas, first,
                   model_param_name((int)all[4 * first], name, sizeof name), all[4 * first + 1],
                   far, ranks);
}

/* One small all-gather of each rank's hash of its parameters. */
static int check(watch_t *w, long g, char *err)
{
    const float *mine;
    TRY(on_host(w, w->rep->params, w->host, &mine, err));
    float f[4], all[4 * MAX_DEVICES];
    model_fingerprint(mine, w->n, f);
    TRY(exchange(w, f, all, err));
    for (int q = 1; q < w->world; q++)
        if (memcmp(all + 4 * q, all, 4 * sizeof *all) != 0)
            return differ(w, g, mine, all, err);
    if (w->rec)
        replica_rec_add(w->rec, g, 0.0, false);
    return DDP_OK;
}

/* WATCH_BATCHES: step g's micro-batches against those at their place an
 * epoch before (a hash of their sample indices). */
static void batches(watch_t *w, long g)
{
    schedule_t *s = w->sch;
    for (int m = 0; m < w->cfg->accum; m++) {
        int rows;
        const uint32_t *idx = schedule_micro(s, g, m, &rows);
        if (rows == 0)
            continue;
        hash64_t h;
        hash64_init(&h);
        hash64_update(&h, idx, (size_t)rows * sizeof *idx);
        uint64_t v = hash64_final(&h) | 1, *at = &w->seen[(g % s->steps_per_epoch) * w->cfg->accum + m];
        if (*at) {
            w->stats->batches_compared++;
            w->stats->batches_repeated += *at == v;
        }
        *at = v;
    }
}

int watch_step(watch_t *w, long g, char *err)
{
    int p;
    if (fault_at(w->rank, g) == FAULT_ULP)
        TRY(dev(w, replica_nudge(w->rep, &p), err));
    if ((w->cfg->watch & WATCH_GRAD) && g == w->sch->start_step && w->rep->grads)
        TRY(dev(w, replica_grad_norm(w->rep, &w->stats->grad_norm), err));
    if (w->seen)
        batches(w, g);
    int n = w->cfg->check_replicas;
    if (n == 0 || (g + 1) % n != 0)
        return DDP_OK;
    double t0 = now_s();
    int rc = check(w, g, err);
    if (w->rec)
        w->rec->seconds += now_s() - t0;
    return rc;
}
