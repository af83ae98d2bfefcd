/* app/report/report_gpu.c: --hardware's GPU lesson (app/predict/gpu_model.h):
 * the table, the sentence naming DP's slower term, --explain's terms, --json. */
#include <math.h>

#include "app/report/report.h"

void report_gpu_sentence(char *out, size_t n, const gpu_lesson_t *g)
{
    const gpu_row_t *r = &g->rows[g->hw.count - 1];
    const gpu_step_t *dp = &r->m[MODE_DP], *ddp = &r->m[MODE_DDP];
    int t = r->dp_culprit;
    if (g->hw.count < 2)
        snprintf(out, n, "One GPU: DP runs the module itself and DDP adds its bucket copies "
                 "(%.2f ms); the lesson needs a box of two or more.",
                 1e3 * ddp->term[GT_DDP_FIXED]);
    else if (t == GT_COUNT)
        snprintf(out, n, "On %d GPUs DP keeps up with DDP here (%.1f ms against %.1f ms a step).",
                 r->devices, 1e3 * dp->step, 1e3 * ddp->step);
    else
        snprintf(out, n, "On %d GPUs DP's step is %.2fx DDP's; the term that makes it slower: %s "
                 "(%.1f ms a step, DDP %.1f ms)%s.", r->devices, dp->step / ddp->step,
                 gpu_terms[t].words, 1e3 * dp->term[t], 1e3 * ddp->term[t],
                 r->dp_input_bound ? "; DP is input-bound: one process loads and scatters every "
                                     "GPU's batch" : "");
}

void report_gpu(FILE *f, const gpu_lesson_t *g)
{
    const hw_profile_t *hw = &g->hw;
    const workload_t *wl = &g->wl;
    fprintf(f, "\npredict --hardware %s: %dx %s, %s link %.4g GB/s each way%s; workload %s "
               "(%.4g M parameters, %s, %s); modelled term by term, not measured\n  GPUs rows/GPU",
            hw->name, hw->count, hw->gpu, hw->link_kind, hw->link_bw / 1e9,
            hw->p2p ? "" : " (no peer access)", wl->name, wl->params / 1e6,
            profile_dtypes[wl->dtype],
            wl->global_batch > 0 ? "a global batch split over the GPUs" : "a batch per GPU");
    for (int m = 0; m < GPU_MODES; m++)
        fprintf(f, " %8s ms", mode_name((mode_t_)m));
    for (int m = 0; m < GPU_MODES; m++)
        fprintf(f, " %6s smp/s", mode_name((mode_t_)m));
    for (int k = 0; k < hw->count; k++) {
        const gpu_row_t *r = &g->rows[k];
        fprintf(f, "\n  %4d %8d", r->devices, r->batch);
        for (int m = 0; m < GPU_MODES; m++)
            fprintf(f, " %11.3f", 1e3 * r->m[m].step);
        for (int m = 0; m < GPU_MODES; m++)
            fprintf(f, " %12.1f", r->m[m].rate);
        fputs(r->dp_input_bound ? "  dp input-bound" : "", f);
    }
    char line[512];
    report_gpu_sentence(line, sizeof line, g);
    fprintf(f, "\n  %s\n", line);
    if (g->check[0])
        fprintf(f, "  %s\n", g->check);
    fputs("  (--explain lists every term; app/predict/README.md derives them)\n", f);
}

void report_gpu_explain(FILE *f, const gpu_lesson_t *g)
{
    const gpu_row_t *r = &g->rows[g->hw.count - 1];
    fprintf(f, "\nThe GPU model's terms on %d GPUs of %s (ms a step; compute at %.0f%% of the %s "
               "peak, %.4g TFLOP/s; %.2f us a launched operator, %.0f%% of it under the "
               "interpreter lock):\n  %-11s %10s %10s %10s  %s\n",
            r->devices, g->hw.name, 100 * g->hw.efficiency, profile_dtypes[g->wl.dtype],
            gpu_model_peak(&g->hw, &g->wl) / 1e12, 1e6 * g->wl.op_s, 100 * GPU_LOCK_SHARE, "term",
            "single", "dp", "ddp", "what");
    for (int t = 0; t <= GT_COUNT; t++) { /* every term that is not 0, then the step */
        double v[GPU_MODES];
        for (int m = 0; m < GPU_MODES; m++)
            v[m] = 1e3 * (t < GT_COUNT ? r->m[m].term[t] : r->m[m].step);
        if (t == GT_COUNT || v[0] > 0 || v[1] > 0 || v[2] > 0)
            fprintf(f, "  %-11s %10.3f %10.3f %10.3f  %s\n",
                    t < GT_COUNT ? gpu_terms[t].key : "step", v[0], v[1], v[2],
                    t < GT_COUNT ? gpu_terms[t].words : "the step");
    }
    fprintf(f, "  DDP's all-reduce hidden behind backward: %.3f ms%s\n", 1e3 * r->ddp_hidden,
            g->hw.p2p ? "" : " (through host memory it runs after backward)");
    if (g->wl.load_rate > 0)
        fprintf(f, "  DP's one process: %d loader worker%s at %.4g samples/s each for %d rows a "
                   "step: %s\n", g->wl.load_workers, g->wl.load_workers == 1 ? "" : "s", g->wl.load_rate,
                r->batch * r->devices, r->dp_input_bound ? "input-bound" : "not input-bound");
    else
        fprintf(f, "  DP input-bound: %s (the workload gives no load_samples_per_s: loading is not "
                   "modelled)\n", r->dp_input_bound ? "yes" : "no");
}

cJSON *report_json_gpu(const gpu_lesson_t *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "hardware", g->hw.name);
    cJSON_AddStringToObject(o, "workload", g->wl.name);
    cJSON_AddStringToObject(o, "model", "gpu-terms");
    cJSON_AddStringToObject(o, "hardware_source", g->hw.source);
    cJSON_AddStringToObject(o, "workload_source", g->wl.source);
    cJSON_AddNumberToObject(o, "efficiency", g->hw.efficiency);
    cJSON_AddNumberToObject(o, "op_s", g->wl.op_s);
    cJSON_AddNumberToObject(o, "lock_share", GPU_LOCK_SHARE);
    cJSON *ld = cJSON_AddObjectToObject(o, "loader");
    report_json_num(ld, "samples_per_s_per_worker", g->wl.load_rate > 0 ? g->wl.load_rate : NAN);
    cJSON_AddNumberToObject(ld, "workers_per_process", g->wl.load_workers);
    cJSON *rows = cJSON_AddArrayToObject(o, "rows");
    for (int k = 0; k < g->hw.count; k++) {
        const gpu_row_t *r = &g->rows[k];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "devices", r->devices);
        cJSON_AddNumberToObject(x, "batch_per_device", r->batch);
        for (int m = 0; m < GPU_MODES; m++) { /* single_s, single_terms_s, dp_s, ... */
            char key[32];
            snprintf(key, sizeof key, "%s_s", mode_name((mode_t_)m));
            cJSON_AddNumberToObject(x, key, r->m[m].step);
            snprintf(key, sizeof key, "%s_terms_s", mode_name((mode_t_)m));
            cJSON *terms = cJSON_AddObjectToObject(x, key);
            for (int t = 0; t < GT_COUNT; t++)
                cJSON_AddNumberToObject(terms, gpu_terms[t].key, r->m[m].term[t]);
        }
        cJSON_AddBoolToObject(x, "dp_input_bound", r->dp_input_bound);
        cJSON_AddStringToObject(x, "dp_slower_term", gpu_terms[r->dp_culprit].key);
        cJSON_AddNumberToObject(x, "ddp_all_reduce_hidden_s", r->ddp_hidden);
        cJSON_AddItemToArray(rows, x);
    }
    report_json_str(o, "check", g->check[0] ? g->check : NULL);
    return o;
}
