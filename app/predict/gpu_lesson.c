/* app/predict/gpu_lesson.c: the GPU lesson as the program shows it
 * (gpu_lesson.h): the options' profiles modelled on 1..count GPUs, and the
 * published case on the box they are checked against. */
#include <math.h>
#include <string.h>

#include "app/predict/cases.h"
#include "app/predict/gpu_lesson.h"
#include "common/base/status.h"

/* "checked against SOURCE: FIGURE predicted X, published Y (pass)" for the
 * first published case on this box, or "". */
static void find_check(gpu_lesson_t *g)
{
    char err[ERR_LEN];
    g->check[0] = 0;
    cJSON *all = cases_load(err);
    const cJSON *c = all ? cases_for(all, g->hw.name) : NULL;
    case_result_t r;
    if (c && cases_eval(c, &r, err) == DDP_OK)
        snprintf(g->check, sizeof g->check,
                 "checked against %s: %s predicted %.3g, published %.3g (%s, tolerance %.0f%%)",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "source")), r.what,
                 r.predicted, r.published, r.pass ? "within" : "outside", 100 * r.tolerance);
    cJSON_Delete(all);
}

int gpu_lesson_prepare(const char *hardware, const char *workload, const config_t *c,
                       gpu_lesson_t *g, char *err)
{
    memset(g, 0, sizeof *g);
    if (!hardware[0])
        return DDP_OK;
    TRY(profile_hardware(hardware, &g->hw, err));
    if (workload[0]) {
        TRY(profile_workload(workload, &g->wl, err));
        if (c->batch_per_device > 0) { /* --batch-per-device overrides the profile's */
            g->wl.batch_per_device = c->batch_per_device;
            g->wl.global_batch = 0;
        }
    } else {
        profile_workload_mlp(c, &g->wl);
    }
    TRY(gpu_model_check(&g->hw, &g->wl, err));
    for (int k = 1; k <= g->hw.count; k++)
        gpu_model_row(&g->hw, &g->wl, k, &g->rows[k - 1]);
    find_check(g);
    g->on = true;
    return DDP_OK;
}

