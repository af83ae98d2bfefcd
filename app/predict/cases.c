/* app/predict/cases.c: each published case predicted from the shipped
 * profiles and judged against its tolerance (cases.h). */
#include <math.h>
#include <string.h>

#include "app/predict/cases.h"
#include "app/predict/gpu_model.h"
#include "common/base/status.h"

cJSON *cases_load(char *err)
{
    const char *text = profile_shipped("predict", "published_cases");
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "cases"))) {
        cJSON_Delete(o);
        err_set(err, DDP_ERR_INPUT, "published_cases.json: no \"cases\" array");
        return NULL;
    }
    return o;
}

static const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static double number(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* One side of a case: its mode's step and throughput on its profiles, the
 * workload's keys overridden by the side's "set" (the case's own setup). */
typedef struct {
    double step, throughput;
    bool input_bound;
} side_t;

static int side(const cJSON *s, const char *id, side_t *out, char *err)
{
    char from[160];
    snprintf(from, sizeof from, "published case %s", id);
    hw_profile_t hw;
    workload_t wl;
    TRY(profile_hardware(str(s, "hardware"), &hw, err));
    const char *text = profile_shipped("workload", str(s, "workload"));
    cJSON *w = text ? cJSON_Parse(text) : NULL;
    if (!w)
        return err_set(err, DDP_ERR_INPUT, "%s: workload: no shipped workload '%s'", from,
                       str(s, "workload"));
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(s, "set");
    for (const cJSON *kv = set ? set->child : NULL; kv; kv = kv->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(w, kv->string);
        cJSON_AddItemToObject(w, kv->string, cJSON_Duplicate(kv, 1));
    }
    int rc = profile_workload_json(w, from, &wl, err);
    cJSON_Delete(w);
    TRY(rc);
    TRY(gpu_model_check(&hw, &wl, err));
    int k = (int)number(s, "devices");
    if (k < 1 || k > hw.count)
        return err_set(err, DDP_ERR_INPUT, "%s: devices: %d is not 1..%d", from, k, hw.count);
    gpu_row_t row;
    gpu_model_row(&hw, &wl, k, &row);
    const char *mode = str(s, "mode");
    bool one = !strcmp(mode, "single");
    const gpu_step_t *st = one ? &row.single : !strcmp(mode, "dp") ? &row.dp : &row.ddp;
    out->step = st->step;
    out->throughput = (one ? 1 : k) * row.batch / st->step;
    if (one)
        out->throughput = (wl.global_batch > 0 ? wl.global_batch : wl.batch_per_device) / st->step;
    out->input_bound = !strcmp(mode, "dp") && row.dp_input_bound;
    return DDP_OK;
}

int cases_eval(const cJSON *c, case_result_t *r, char *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", str(c, "id"));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "a");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(c, "b");
    snprintf(r->hardware, sizeof r->hardware, "%s", str(a, "hardware"));
    snprintf(r->what, sizeof r->what, "%s", str(c, "figure"));
    side_t sa = {0}, sb = {0};
    TRY(side(a, r->id, &sa, err));
    if (b)
        TRY(side(b, r->id, &sb, err));
    const char *metric = str(c, "metric");
    r->published = number(c, "published");
    r->tolerance = number(c, "tolerance");
    r->declared_pass = !strcmp(str(c, "status"), "pass");
    if (!strcmp(metric, "step"))
        r->predicted = sa.step;
    else if (!strcmp(metric, "ratio"))
        r->predicted = sa.step / sb.step;
    else if (!strcmp(metric, "speedup"))
        r->predicted = sa.throughput / sb.throughput;
    else if (!strcmp(metric, "slower") || !strcmp(metric, "input_bound")) {
        r->flag = true;
        r->predicted = !strcmp(metric, "slower") ? sa.step > sb.step : sa.input_bound;
        r->pass = r->predicted == 1.0;
        return DDP_OK;
    } else
        return err_set(err, DDP_ERR_INPUT, "published case %s: metric: '%s' is not step, ratio, "
                       "speedup, slower or input_bound", r->id, metric);
    if (!(r->published > 0) || !(r->tolerance > 0))
        return err_set(err, DDP_ERR_INPUT, "published case %s: published or tolerance missing",
                       r->id);
    r->pass = fabs(r->predicted / r->published - 1.0) <= r->tolerance;
    return DDP_OK;
}

const cJSON *cases_for(const cJSON *all, const char *hardware)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(all, "cases"))
    {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "a");
        if (!strcmp(str(a, "hardware"), hardware) && strcmp(str(c, "metric"), "input_bound"))
            return c;
    }
    return NULL;
}

int cases_markdown(FILE *f, char *err)
{
    cJSON *all = cases_load(err);
    if (!all)
        return DDP_ERR_INPUT;
    fputs("| case | source | setup | published | figure | predicted | tolerance | result |\n"
          "|---|---|---|---|---|---|---|---|\n", f);
    const cJSON *c;
    int rc = DDP_OK;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(all, "cases"))
    {
        case_result_t r;
        if ((rc = cases_eval(c, &r, err)) != DDP_OK)
            break;
        char pred[32], pub[32], tol[32];
        if (r.flag) {
            snprintf(pred, sizeof pred, "%s", r.predicted == 1.0 ? "yes" : "no");
            snprintf(pub, sizeof pub, "yes");
            snprintf(tol, sizeof tol, "direction");
        } else {
            snprintf(pred, sizeof pred, "%.4g", r.predicted);
            snprintf(pub, sizeof pub, "%.4g", r.published);
            snprintf(tol, sizeof tol, "%.0f%% (off %+.1f%%)", 100 * r.tolerance,
                     100 * (r.predicted / r.published - 1.0));
        }
        fprintf(f, "| %s | %s | %s | %s | %s: %s | %s | %s | %s%s%s |\n", r.id, str(c, "source"),
                str(c, "setup"), str(c, "as_published"), r.what, pub, pred, tol,
                r.pass ? "pass" : "miss", r.pass ? "" : ": ", r.pass ? "" : str(c, "missing"));
    }
    cJSON_Delete(all);
    return rc;
}
