/* app/predict/cases.c: each published case predicted from the shipped
 * profiles and judged against its tolerance (gpu_model.h). */
#include <math.h>
#include <string.h>

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

/* One side of a case: its mode's step on its profiles, the workload's keys
 * overridden by the side's "set" (the case's own setup); and whether DP is
 * input-bound there. */
static int side(const cJSON *s, const char *id, gpu_step_t *out, bool *input_bound, char *err)
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
    int k = (int)number(s, "devices"), mode = mode_parse(str(s, "mode"));
    if (k < 1 || k > hw.count || mode < 0 || mode >= GPU_MODES)
        return err_set(err, DDP_ERR_INPUT, "%s: devices %d (1..%d) or mode '%s' (single, dp, ddp)",
                       from, k, hw.count, str(s, "mode"));
    gpu_row_t row;
    gpu_model_row(&hw, &wl, k, &row);
    *out = row.m[mode];
    *input_bound = mode == MODE_DP && row.dp_input_bound;
    return DDP_OK;
}

int cases_eval(const cJSON *c, case_result_t *r, char *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", str(c, "id"));
    snprintf(r->what, sizeof r->what, "%s", str(c, "figure"));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(c, "b");
    gpu_step_t sa = {0}, sb = {0};
    bool bound = false, unused;
    TRY(side(cJSON_GetObjectItemCaseSensitive(c, "a"), r->id, &sa, &bound, err));
    if (b)
        TRY(side(b, r->id, &sb, &unused, err));
    const char *metric = str(c, "metric");
    r->published = number(c, "published");
    r->tolerance = number(c, "tolerance");
    r->declared_pass = !strcmp(str(c, "status"), "pass");
    r->flag = !strcmp(metric, "slower") || !strcmp(metric, "input_bound");
    if (!strcmp(metric, "step"))
        r->predicted = sa.step;
    else if (!strcmp(metric, "ratio"))
        r->predicted = sa.step / sb.step;
    else if (!strcmp(metric, "speedup"))
        r->predicted = sa.rate / sb.rate;
    else if (r->flag)
        r->predicted = !strcmp(metric, "slower") ? sa.step > sb.step : bound;
    else
        return err_set(err, DDP_ERR_INPUT, "published case %s: metric: '%s' is not step, ratio, "
                       "speedup, slower or input_bound", r->id, metric);
    if (!r->flag && (!(r->published > 0) || !(r->tolerance > 0)))
        return err_set(err, DDP_ERR_INPUT, "published case %s: published or tolerance missing",
                       r->id);
    r->pass = r->flag ? r->predicted == 1.0
                      : fabs(r->predicted / r->published - 1.0) <= r->tolerance;
    return DDP_OK;
}

void cases_check(const char *hardware, char *out, size_t n)
{
    char err[ERR_LEN];
    out[0] = 0;
    cJSON *all = cases_load(err);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(all, "cases"))
    {
        case_result_t r;
        if (strcmp(str(cJSON_GetObjectItemCaseSensitive(c, "a"), "hardware"), hardware) ||
            !strcmp(str(c, "metric"), "input_bound"))
            continue;
        if (cases_eval(c, &r, err) == DDP_OK)
            snprintf(out, n, "checked against %s: %s predicted %.3g, published %.3g (%s, "
                     "tolerance %.0f%%)", str(c, "source"), r.what, r.predicted, r.published,
                     r.pass ? "within" : "outside", 100 * r.tolerance);
        break;
    }
    cJSON_Delete(all);
}
