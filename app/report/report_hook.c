/* app/report/report_hook.c: what a DDP communication hook (--comm-hook) cost
 * and saved: the bytes sent per step against plain DDP's, and its drift from
 * the same run without the hook (made first): parameters and loss curves. */
#include <math.h>

#include "app/report/report.h"

/* the loss rows the table shows at most (the JSON carries up to LOSS_JSON_MAX) */
#define LOSS_ROWS_MAX 12
#define LOSS_JSON_MAX 512

double report_param_distance(const run_result_t *a, const run_result_t *b, double *max_abs)
{
    if (max_abs)
        *max_abs = NAN;
    if (!a || !b || !a->params || !b->params || a->nparams != b->nparams || a->nparams == 0)
        return NAN;
    double d2 = 0.0, n2 = 0.0, mx = 0.0;
    for (size_t i = 0; i < a->nparams; i++) {
        double d = (double)a->params[i] - (double)b->params[i];
        d2 += d * d;
        n2 += (double)b->params[i] * b->params[i];
        if (fabs(d) > mx)
            mx = fabs(d);
    }
    if (max_abs)
        *max_abs = mx;
    return n2 > 0.0 ? sqrt(d2 / n2) : (d2 > 0.0 ? INFINITY : 0.0);
}

static double bytes_sent(const run_result_t *r)
{
    double s = 0.0;
    for (int i = 0; i < r->nbuckets; i++)
        s += r->bucket_bytes[i];
    return s;
}

/* The loss the reference logged at step `step` (NAN: none). */
static double ref_loss_at(const run_result_t *ref, long step)
{
    for (long k = 0; k < ref->log.n; k++)
        if (ref->log.pt[k].step == step)
            return ref->log.pt[k].loss;
    return NAN;
}

static bool hooked(const config_t *c, const run_result_t *r)
{
    return c->comm_hook != HOOK_NONE && strategy_words(r->mode)->ranks;
}

void report_hook(FILE *f, const config_t *c, const run_result_t *r)
{
    if (!hooked(c, r))
        return;
    char name[48], a[32], b[32];
    config_comm_hook_text(c, name, sizeof name);
    double sent = bytes_sent(r), plain = (double)r->nparams * sizeof(float);
    fprintf(f, "  comm hook %s: %s sent per step by each rank (plain DDP %s: %.2fx less)\n", name,
            report_fmt_bytes(a, sizeof a, sent), report_fmt_bytes(b, sizeof b, plain),
            sent > 0 ? plain / sent : 0.0);
    const run_result_t *ref = r->hook_ref;
    double mx = NAN, d = report_param_distance(r, ref, &mx);
    if (!ref || !isfinite(d)) {
        fprintf(f, "  drift from plain DDP: not measured (no reference run)\n");
        return;
    }
    fprintf(f, "  drift from plain DDP (the same run without the hook, made first): final "
               "parameters' relative distance %.3g (largest |difference| %.3g)\n", d, mx);
    long n = r->log.n, shown = 0;
    if (n == 0)
        return;
    fprintf(f, "    %8s  %12s  %12s  %10s\n", "step", "loss plain", "loss hooked", "difference");
    long every = n > LOSS_ROWS_MAX ? (n + LOSS_ROWS_MAX - 1) / LOSS_ROWS_MAX : 1;
    for (long k = 0; k < n; k++) {
        if (k % every && k != n - 1)
            continue;
        const loss_point_t *p = &r->log.pt[k];
        double lr = ref_loss_at(ref, p->step);
        fprintf(f, "    %8ld  %12.6g  %12.6g  %10.3g\n", p->step, lr, p->loss, p->loss - lr);
        shown++;
    }
    if (shown < n)
        fprintf(f, "    (%ld of %ld logged steps; --json has them all)\n", shown, n);
}

cJSON *report_json_hook(const config_t *c, const run_result_t *r)
{
    if (!hooked(c, r))
        return cJSON_CreateNull();
    char name[48];
    config_comm_hook_text(c, name, sizeof name);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "bytes_per_step", bytes_sent(r));
    cJSON_AddNumberToObject(o, "bytes_per_step_plain", (double)r->nparams * sizeof(float));
    const run_result_t *ref = r->hook_ref;
    double mx = NAN, d = report_param_distance(r, ref, &mx);
    if (!ref || !isfinite(d)) {
        cJSON_AddNullToObject(o, "drift");
        return o;
    }
    cJSON *dr = cJSON_AddObjectToObject(o, "drift");
    cJSON_AddNumberToObject(dr, "params_rel_l2", d);
    cJSON_AddNumberToObject(dr, "params_max_abs", mx);
    cJSON_AddNumberToObject(dr, "final_loss_plain", ref->final_loss);
    cJSON *curve = cJSON_AddArrayToObject(dr, "loss_curve"); /* [step, plain, hooked] */
    long every = r->log.n > LOSS_JSON_MAX ? (r->log.n + LOSS_JSON_MAX - 1) / LOSS_JSON_MAX : 1;
    for (long k = 0; k < r->log.n; k++) {
        if (k % every && k != r->log.n - 1)
            continue;
        const loss_point_t *p = &r->log.pt[k];
        double lr = ref_loss_at(ref, p->step);
        cJSON *row = cJSON_CreateArray();
        cJSON_AddItemToArray(row, cJSON_CreateNumber((double)p->step));
        cJSON_AddItemToArray(row, isfinite(lr) ? cJSON_CreateNumber(lr) : cJSON_CreateNull());
        cJSON_AddItemToArray(row, cJSON_CreateNumber(p->loss));
        cJSON_AddItemToArray(curve, row);
    }
    return o;
}
