/* dp/dp_replicas.c: --check-replicas N in DP: after steps N, 2N, ... do the
 * replicas hold what device 0 replicated at the step's start?  A DP replica
 * lives one step (device 0 replicates its parameters at every step), so
 * device 0 hashes its parameters before a checked step (what the step
 * replicates: they change in its optimizer step) and after the step every
 * device with a replica hashes its own; one small gather of the hashes (4
 * floats a device) onto device 0 compares them.  Device 0 says at a host
 * barrier whether one differed; only then the replicas are gathered onto
 * device 0 (a second exchange) to name the first layer that differs and by
 * how much, and device 0 stops the run (a scenario's watch records the
 * distance and goes on).  Outside the fenced step; nothing when off.
 * DDPBENCH_FAULT=ulp:D:S nudges device D's replica after step S (D > 0: a
 * change of device 0's parameters is the model itself, replicated to all). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/fault.h"
#include "common/base/hash.h"
#include "dp/dp.h"

static int dev(const dp_dev_t *dv, int rc, char *err)
{
    return rc == DDP_OK ? DDP_OK : err_set(err, rc, "%s: %s", dv->name, backend_last_error(dv->be));
}

/* Device d's parameters on the host: its memory, or a copy (copy: always;
 * device 0's hash of the step's start must outlive its optimizer step). */
static int on_host(dp_ctx_t *c, int d, bool copy, const float **out, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    size_t bytes = c->spec.nparams * sizeof(float);
    float **h = &c->check.host[d];
    *out = dv->rep.params;
    if (!copy && backend_host_visible(dv->be))
        return DDP_OK;
    if (!*h && !(*h = malloc(bytes)))
        return err_set(err, DDP_ERR_RUNTIME, "%s: out of memory for --check-replicas", dv->name);
    *out = *h;
    return dev(dv, backend_d2h(dv->be, *h, dv->rep.params, bytes), err);
}

static void hash4(const float *p, size_t n, float f[4])
{
    hash64_t h;
    hash64_init(&h);
    hash64_update(&h, p, n * sizeof *p);
    uint64_t v = hash64_final(&h);
    for (int i = 0; i < 4; i++)
        f[i] = (float)((v >> (16 * i)) & 0xffff); /* exact in a float, whatever moves it */
}

/* A gather onto device 0 of each replica's count floats from send (device
 * d's block at offset d * count). */
static int gather(dp_ctx_t *c, int d, int nrep, const float *send, float *recv, size_t count,
                  char *err)
{
    dp_dev_t *dv = &c->dev[d];
    comm_op_t op = {.kind = COLL_GATHER, .send = send, .recv = recv,
                    .count = d < nrep ? count : 0, .offset = (size_t)d * count, .root = 0,
                    .tag = "the replicas' check"};
    return comm_check(dv->comm, comm_run(dv->comm, &op, NULL), dv->name, err);
}

/* Device 0, once a hash differed: every replica gathered, each against what
 * the step replicated; the first device that differs is named. */
static int differ(dp_ctx_t *c, long g, int nrep, char *err)
{
    struct dp_check *k = &c->check;
    size_t n = c->spec.nparams;
    const float *ref = k->host[0];
    int first = -1, p = -1;
    double far = 0.0, delta = 0.0;
    float *h = backend_host_visible(c->dev[0].be) ? NULL : malloc(n * sizeof *h);
    if (!h && !backend_host_visible(c->dev[0].be))
        return err_set(err, DDP_ERR_RUNTIME, "device 0: out of memory for --check-replicas");
    int rc = DDP_OK;
    for (int d = 1; d < nrep && rc == DDP_OK; d++) {
        int pd;
        double dd;
        const float *mine = h ? h : k->scratch + d * n;
        if (h)
            rc = dev(&c->dev[0], backend_d2h(c->dev[0].be, h, k->scratch + d * n, n * sizeof *h),
                     err);
        far = fmax(far, model_diff(&c->spec, ref, mine, &pd, &dd));
        if (pd >= 0 && first < 0) {
            first = d;
            p = pd;
            delta = dd;
        }
    }
    free(h);
    if (rc != DDP_OK || first < 0)
        return rc;
    replica_rec_add(&c->res->replicas, g, far, first, p, delta);
    if (c->cfg->watch & WATCH_REPLICAS)
        return DDP_OK;
    char name[32];
    return err_set(err, DDP_ERR_RUNTIME,
                   "the replicas differ after step %ld (--check-replicas %d): device %d's %s is "
                   "up to %.3g from the parameters device 0 replicated (the whole model up to %.3g)",
                   g + 1, c->cfg->check_replicas, first, model_param_name(p, name, sizeof name),
                   delta, far);
}

/* After step g's last barrier (after: true), or before it on device 0. */
int dp_replicas(dp_ctx_t *c, int d, long g, bool after, char *err)
{
    struct dp_check *k = &c->check;
    dp_dev_t *dv = &c->dev[d];
    int n = c->cfg->check_replicas, nrep = c->plan[g & 1].nrep, p;
    if (n == 0)
        return DDP_OK;
    size_t bytes = c->spec.nparams * sizeof(float);
    if (after && d > 0 && fault_at(d, g) == FAULT_ULP)
        TRY(dev(dv, replica_nudge(&dv->rep, &p), err));
    if ((g + 1) % n != 0 || (!after && d > 0))
        return DDP_OK;
    const float *mine;
    float f[4] = {0};
    if (d > 0 || !after) { /* device 0's own part of the gather is not a replica */
        TRY(on_host(c, d, !after, &mine, err));
        hash4(mine, c->spec.nparams, f);
    }
    if (!after) { /* device 0: what step g replicates */
        memcpy(k->ref, f, sizeof f);
        return DDP_OK;
    }
    if ((!k->fp[d] && !(k->fp[d] = backend_alloc_for(dv->be, sizeof f, MEM_COMM))) ||
        (d == 0 && !k->all && !(k->all = backend_alloc_for(dv->be, 4 * c->ndev * sizeof f[0],
                                                              MEM_COMM))))
        return err_set(err, DDP_ERR_RUNTIME, "%s: out of memory for --check-replicas", dv->name);
    float all[4 * MAX_DEVICES];
    TRY(dev(dv, backend_h2d(dv->be, k->fp[d], f, sizeof f), err));
    TRY(gather(c, d, nrep, k->fp[d], k->all, 4, err));
    if (d == 0) {
        TRY(dev(dv, backend_d2h(dv->be, all, k->all, 4 * c->ndev * sizeof all[0]), err));
        k->bad = false;
        for (int q = 1; q < nrep; q++)
            k->bad = k->bad || memcmp(all + 4 * q, k->ref, sizeof f) != 0;
        if (!k->bad)
            replica_rec_add(&c->res->replicas, g, 0.0, -1, -1, 0.0);
    }
    /* Barrier: device 0's verdict is written; a second exchange only on a difference. */
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    if (!k->bad)
        return DDP_OK;
    if (d == 0 && !k->scratch && !(k->scratch = backend_alloc_for(dv->be, c->ndev * bytes,
                                                                   MEM_COMM)))
        return err_set(err, DDP_ERR_RUNTIME, "device 0: out of memory for --check-replicas");
    TRY(gather(c, d, nrep, dv->rep.params, k->scratch, c->spec.nparams, err));
    return d == 0 ? differ(c, g, nrep, err) : DDP_OK;
}

void dp_replicas_free(dp_ctx_t *c, int d)
{
    struct dp_check *k = &c->check;
    backend_free(c->dev[d].be, k->fp[d]);
    free(k->host[d]);
    if (d == 0) {
        backend_free(c->dev[0].be, k->all);
        backend_free(c->dev[0].be, k->scratch);
    }
}
