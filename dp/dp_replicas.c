/* dp/dp_replicas.c: --check-replicas N in DP: after steps N, 2N, ... do the replicas hold what
 * device 0 replicated at the step's start?  Device 0 hashes its parameters before a checked
 * step and broadcasts the hash after it (4 floats, no meeting more); a device whose replica
 * differs names the first layer that differs against device 0's host copy and stops the run.
 * DDPBENCH_FAULT=ulp:D:S nudges device D's replica (D > 0) after step S. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/fault.h"
#include "dp/dp.h"

static int dev(const dp_dev_t *dv, int rc, char *err)
{
    return rc == DDP_OK ? DDP_OK : err_set(err, rc, "%s: %s", dv->name, backend_last_error(dv->be));
}

/* Device d's parameters on the host: its memory, or a copy in host[slot]
 * (copy: always; device 0's of a check's step must outlive its optimizer
 * step, two of them in turn: a device may still read the last one). */
static int on_host(dp_ctx_t *c, int d, int slot, bool copy, const float **out, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    size_t bytes = c->spec.nparams * sizeof(float);
    float **h = &c->check.host[slot];
    *out = dv->rep.params;
    if (!copy && backend_host_visible(dv->be))
        return DDP_OK;
    if (!*h && !(*h = malloc(bytes)))
        return err_set(err, DDP_ERR_RUNTIME, "%s: out of memory for --check-replicas", dv->name);
    *out = *h;
    return dev(dv, backend_d2h(dv->be, *h, dv->rep.params, bytes), err);
}

static int check(dp_ctx_t *c, int d, long g, bool after, char *err)
{
    struct dp_check *k = &c->check;
    dp_dev_t *dv = &c->dev[d];
    int nrep = c->plan[g & 1].nrep, p;
    long turn = (g + 1) / c->cfg->check_replicas; /* device 0's copy of this check's */
    if (after && d > 0 && fault_at(d, g) == FAULT_ULP)
        TRY(dev(dv, replica_nudge(&dv->rep, &p), err));
    if ((g + 1) % c->cfg->check_replicas != 0 || (!after && d > 0))
        return DDP_OK;
    /* device 0's hash and copy in two places in turn: a device may still read
     * the last ones (a root's buffer is read after its launch: comm.h) */
    if (!k->fp[d] && !(k->fp[d] = backend_alloc_for(dv->be, 8 * sizeof(float), MEM_COMM)))
        return err_set(err, DDP_ERR_RUNTIME, "%s: out of memory for --check-replicas", dv->name);
    const float *mine = NULL;
    float f[4], ref[4], *at = k->fp[d] + (d == 0 ? 4 * (turn & 1) : 0);
    if (!after) { /* device 0: what step g replicates, kept for the step after it */
        TRY(on_host(c, 0, (int)(turn & 1) * MAX_DEVICES, true, &mine, err));
        model_fingerprint(mine, c->spec.nparams, k->ref[turn & 1]);
        return dev(dv, backend_h2d(dv->be, at, k->ref[turn & 1], sizeof f), err);
    }
    /* the hash to every device (device 0's launch follows its copy of the parameters) */
    comm_op_t op = {.kind = COLL_BROADCAST, .recv = at, .count = 4, .root = 0,
                    .idle = d >= nrep, .tag = "the replicas' check"};
    TRY(comm_check(dv->comm, comm_run(dv->comm, &op, NULL), dv->name, err));
    if (d == 0)
        replica_rec_add(&c->res->replicas, g, 0.0, false);
    if (d == 0 || d >= nrep)
        return DDP_OK;
    TRY(on_host(c, d, d, false, &mine, err));
    model_fingerprint(mine, c->spec.nparams, f);
    TRY(dev(dv, backend_d2h(dv->be, ref, k->fp[d], sizeof ref), err));
    if (memcmp(ref, f, sizeof f) == 0)
        return DDP_OK;
    int pd;
    double dd, far = model_diff(&c->spec, k->host[(turn & 1) * MAX_DEVICES], mine, &pd, &dd);
    char name[32];
    return err_set(err, DDP_ERR_RUNTIME,
                   "the replicas differ after step %ld (--check-replicas %d): device %d's %s is "
                   "up to %.3g from the parameters device 0 replicated (its whole replica up to "
                   "%.3g)",
                   g + 1, c->cfg->check_replicas, d, model_param_name(pd, name, sizeof name),
                   dd, far);
}

/* After step g's last barrier (after: true), or before it on device 0;
 * each device times its part. */
int dp_replicas(dp_ctx_t *c, int d, long g, bool after, char *err)
{
    double t0 = now_s();
    int rc = check(c, d, g, after, err);
    c->check.secs[d] += now_s() - t0;
    return rc;
}

void dp_replicas_free(dp_ctx_t *c, int d)
{
    struct dp_check *k = &c->check;
    backend_free(c->dev[d].be, k->fp[d]);
    free(k->host[d]);
    if (d == 0)
        free(k->host[MAX_DEVICES]);
}
