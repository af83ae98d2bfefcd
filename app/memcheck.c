/* app/memcheck.c: the least memory a run needs, against the machine's available memory and
 * --mem-limit, before anything is allocated (docs/faults.md, "Memory": a lower bound, so a
 * refusal is never wrong; the OOM killer would end the run with SIGKILL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "common/train/strategy.h"
#include "common/base/procfile.h"

/* Bytes available to this run, 0 when unknown (then nothing is refused). */
static double mem_available(const char **from)
{
    const char *env = getenv("DDPBENCH_MEM_AVAILABLE");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (*end == 0 && v > 0) {
            *from = "DDPBENCH_MEM_AVAILABLE";
            return v;
        }
    }
    char kb[64];
    if (!procfile_value("/proc/meminfo", "MemAvailable:", kb, sizeof kb))
        return 0;
    *from = "MemAvailable in /proc/meminfo";
    return strtod(kb, NULL) * 1024.0;
}

static void human(double b, char *out, size_t size)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    snprintf(out, size, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

/* One device's least need in one run (cfg's mode), in bytes, by part. */
typedef struct {
    double params, grads, optim, acts, host;
} need_t;

static need_t device_need(const config_t *c, const model_spec_t *s, const dataset_t *d,
                          int devices, int device)
{
    need_t n;
    double P = (double)s->nparams * sizeof(float);
    /* what the strategy holds there (a DDP rank under --zero: its shard) */
    strategy_mem_t m = strategy_mem_whole(s, c, true);
    char ignored[ERR_LEN];
    strategy_of(c->mode)->mem(s, c, devices, device, &m, ignored);
    n.params = m.params;
    n.grads = m.grads;
    n.optim = m.optim;
    /* each row's input, targets and every layer's output */
    double rows = (c->batch + devices - 1) / devices, per_row = d->in_dim + d->tgt_cols;
    for (int l = 1; l <= s->nlayers; l++)
        per_row += s->dims[l];
    n.acts = rows * per_row * sizeof(float);
    /* the host's copy of the parameters each process keeps (the initial
     * ones; a DDP rank's for the broadcast) */
    n.host = P;
    return n;
}

static double need_sum(const need_t *n)
{
    return n->params + n->grads + n->optim + n->acts + n->host;
}

static int refuse(double need, double avail, const char *from, const char *what, char *err)
{
    char a[32], b[32];
    human(need, a, sizeof a);
    human(avail, b, sizeof b);
    return err_set(err, DDP_ERR_INPUT,
                   "memory: the run needs at least %s (%s), and %s is available (%s): it would "
                   "be killed by the kernel's out-of-memory killer; use a smaller model, batch "
                   "or fewer devices",
                   a, what, b, from);
}

/* --mem-limit: each device's least need (parameters, gradients, state and
 * activations, as the memory table counts them) within the limit, on every
 * run of the job; a DDP run refused is told what each ZeRO stage would need. */
static int mem_limit_check(const app_job_t *j, const dataset_t *d, char *err)
{
    double lim_b = j->opts.mem_limit;
    if (lim_b <= 0)
        return DDP_OK;
    for (int i = 0; i < j->n; i++) {
        const config_t *c = &j->cfgs[i];
        const strategy_words_t *w = strategy_words(c->mode);
        int devices = w->reference ? 1 : c->ngpus;
        need_t n = device_need(c, &j->spec, d, devices, 0);
        /* the buffers one device's replica allocates for its rows */
        n.acts = replica_act_bytes(&j->spec, (c->batch + devices - 1) / devices, d->tgt_cols);
        double dev = n.params + n.grads + n.optim + n.acts;
        if (dev <= lim_b)
            continue;
        char lim[32], a[32], p[32], g[32], o[32], t[32], alt[256] = "";
        human(lim_b, lim, sizeof lim);
        human(dev, a, sizeof a);
        human(n.params, p, sizeof p);
        human(n.grads, g, sizeof g);
        human(n.optim, o, sizeof o);
        human(n.acts, t, sizeof t);
        if (w->ranks) /* what sharding would need: the way out, if any */
            for (int st = c->zero + 1; st <= 3; st++) {
                config_t cz = *c;
                cz.zero = st;
                need_t m = device_need(&cz, &j->spec, d, devices, 0);
                m.acts = n.acts;
                char b[32];
                human(m.params + m.grads + m.optim + m.acts, b, sizeof b);
                size_t len = strlen(alt);
                snprintf(alt + len, sizeof alt - len, "%s--zero %d needs %s", len ? ", " : "; ",
                         st, b);
            }
        char label[32];
        if (w->ranks && c->zero)
            snprintf(label, sizeof label, "ddp --zero %d", c->zero);
        else
            snprintf(label, sizeof label, "%s", mode_name(c->mode));
        return err_set(err, DDP_ERR_INPUT,
                       "--mem-limit %s: %s needs at least %s per device (parameters %s, "
                       "gradients %s, optimizer state %s, activations %s)%s",
                       lim, label, a, p, g, o, t, alt);
    }
    return DDP_OK;
}

int app_mem_check(const app_job_t *j, const dataset_t *d, char *err)
{
    TRY(mem_limit_check(j, d, err));
    const char *from = "";
    double avail = mem_available(&from);
    if (avail <= 0)
        return DDP_OK;
    double data = (double)d->n * (d->in_dim + d->tgt_cols) * sizeof(float);
    /* compare's runs go one after another: the largest counts */
    double worst = 0;
    char what[ERR_LEN] = "";
    for (int i = 0; i < j->n; i++) {
        const config_t *c = &j->cfgs[i];
        const strategy_words_t *w = strategy_words(c->mode);
        int devices = w->reference || j->mpi ? 1 : c->ngpus;
        need_t n = device_need(c, &j->spec, d, w->reference ? 1 : c->ngpus, 0);
        need_t rest = w->lead ? device_need(c, &j->spec, d, c->ngpus, 1) : n;
        if (w->lead) /* one process: one host copy */
            rest.host = 0;
        double dev = c->backend == BACKEND_CPU ? need_sum(&n) + (devices - 1) * need_sum(&rest)
                                               : 0;
        /* DDP's shared segment carries rank 0's final parameters back, into
         * the run's result: two more copies, in the supervisor */
        double total = dev + data + (w->ranks ? 2 * n.params : 0);
        if (total <= worst)
            continue;
        worst = total;
        char p[32], g[32], o[32], a[32], t[32];
        human(n.params, p, sizeof p);
        human(n.grads, g, sizeof g);
        human(n.optim, o, sizeof o);
        human(n.acts, a, sizeof a);
        human(data, t, sizeof t);
        if (c->backend == BACKEND_CPU)
            snprintf(what, sizeof what,
                     "%s: %d device%s, each parameters %s, gradients %s, optimizer state %s, "
                     "activations %s, a host copy of the parameters %s; %sthe data %s",
                     mode_name(c->mode), devices, devices == 1 ? "" : "s", p, g, o, a, p,
                     w->ranks ? "the supervisor's 2 copies of the parameters; " : "",
                     t);
        else
            snprintf(what, sizeof what, "the data %s, in host memory", t);
    }
    return worst > avail ? refuse(worst, avail, from, what, err) : DDP_OK;
}

int app_mem_check_comm(const config_t *c, bool mpi, char *err)
{
    const char *from = "";
    double avail = mem_available(&from);
    if (avail <= 0 || c->backend != BACKEND_CPU)
        return DDP_OK;
    /* each rank: a send and a receive buffer of the largest size, and a host copy */
    int ranks = mpi ? 1 : c->ngpus;
    double per = 3.0 * (double)c->max_bytes, need = ranks * per;
    if (need <= avail)
        return DDP_OK;
    char b[32], what[128];
    human((double)c->max_bytes, b, sizeof b);
    snprintf(what, sizeof what, "--mode comm: %d rank%s, each 3 buffers of --max-bytes %s", ranks,
             ranks == 1 ? "" : "s", b);
    return refuse(need, avail, from, what, err);
}
