/* app/report/report_gpu.c: the GPU lesson (app/predict/gpu_lesson.h) as the
 * program shows it: the table and its sentence, --explain's terms, --json's
 * "predict" object and the page's chart. */
#include <math.h>
#include <string.h>

#include "app/report/report_page.h"
#include "common/base/status.h"

static double thr(const gpu_lesson_t *g, const gpu_row_t *r, const gpu_step_t *s, bool one)
{
    int rows = one ? (g->wl.global_batch > 0 ? g->wl.global_batch : g->wl.batch_per_device)
                   : r->batch * r->devices;
    return s->step > 0 ? rows / s->step : 0.0;
}

/* The sentence: which term makes DP slower than DDP on all the box's GPUs
 * (the terminal's and the page's). */
static void sentence(char *out, size_t n, const gpu_lesson_t *g)
{
    const gpu_row_t *r = &g->rows[g->hw.count - 1];
    int t = gpu_model_dp_culprit(r);
    if (g->hw.count < 2)
        snprintf(out, n, "One GPU: DP runs the module itself and DDP adds its bucket copies "
                 "(%.2f ms); the lesson needs a box of two or more.", 1e3 * r->ddp.term[GT_DDP_FIXED]);
    else if (t == GT_COUNT)
        snprintf(out, n, "On %d GPUs DP keeps up with DDP here (%.1f ms against %.1f ms a step).",
                 r->devices, 1e3 * r->dp.step, 1e3 * r->ddp.step);
    else
        snprintf(out, n, "On %d GPUs DP's step is %.2fx DDP's; the term that makes it slower: %s "
                 "(%.1f ms a step, DDP %.1f ms)%s.", r->devices, r->dp.step / r->ddp.step,
                 gpu_term_words(t), 1e3 * r->dp.term[t], 1e3 * r->ddp.term[t],
                 r->dp_input_bound ? "; DP is input-bound: one process loads and scatters every "
                                     "GPU's batch" : "");
}

void report_gpu(FILE *f, const gpu_lesson_t *g)
{
    const hw_profile_t *hw = &g->hw;
    const workload_t *wl = &g->wl;
    fprintf(f, "\npredict --hardware %s: %dx %s, %s link %.4g GB/s each way%s; workload %s "
               "(%.4g M parameters, %s, %s); modelled term by term, not measured\n",
            hw->name, hw->count, hw->gpu, hw->link_kind, hw->link_bw / 1e9,
            hw->p2p ? "" : " (no peer access)", wl->name, wl->params / 1e6,
            profile_dtypes[wl->dtype],
            wl->global_batch > 0 ? "a global batch split over the GPUs" : "a batch per GPU");
    fprintf(f, "  %4s %8s %11s %11s %11s %12s %12s %12s\n", "GPUs", "rows/GPU", "single ms",
            "dp ms", "ddp ms", "single smp/s", "dp smp/s", "ddp smp/s");
    for (int k = 0; k < hw->count; k++) {
        const gpu_row_t *r = &g->rows[k];
        fprintf(f, "  %4d %8d %11.3f %11.3f %11.3f %12.1f %12.1f %12.1f%s\n", r->devices, r->batch,
                1e3 * r->single.step, 1e3 * r->dp.step, 1e3 * r->ddp.step,
                thr(g, r, &r->single, true), thr(g, r, &r->dp, false), thr(g, r, &r->ddp, false),
                r->dp_input_bound ? "  dp input-bound" : "");
    }
    char line[512];
    sentence(line, sizeof line, g);
    fprintf(f, "  %s\n", line);
    if (g->check[0])
        fprintf(f, "  %s\n", g->check);
    fprintf(f, "  (--explain lists every term; app/predict/README.md derives them)\n");
}

void report_gpu_explain(FILE *f, const gpu_lesson_t *g)
{
    const gpu_row_t *r = &g->rows[g->hw.count - 1];
    fprintf(f, "\nThe GPU model's terms on %d GPUs of %s (ms a step; compute at %.0f%% of the %s "
               "peak, %.4g TFLOP/s; %.2f us a launched operator, %.0f%% of it under the "
               "interpreter lock):\n",
            r->devices, g->hw.name, 100 * g->hw.efficiency, profile_dtypes[g->wl.dtype],
            gpu_model_peak(&g->hw, &g->wl) / 1e12, 1e6 * g->wl.op_s, 100 * GPU_LOCK_SHARE);
    fprintf(f, "  %-11s %10s %10s %10s  %s\n", "term", "single", "dp", "ddp", "what");
    for (int t = 0; t < GT_COUNT; t++)
        if (r->single.term[t] > 0 || r->dp.term[t] > 0 || r->ddp.term[t] > 0)
            fprintf(f, "  %-11s %10.3f %10.3f %10.3f  %s\n", gpu_term_key(t),
                    1e3 * r->single.term[t], 1e3 * r->dp.term[t], 1e3 * r->ddp.term[t],
                    gpu_term_words(t));
    fprintf(f, "  %-11s %10.3f %10.3f %10.3f  the step\n", "step", 1e3 * r->single.step,
            1e3 * r->dp.step, 1e3 * r->ddp.step);
    fprintf(f, "  DDP's all-reduce hidden behind backward: %.3f ms%s\n", 1e3 * r->ddp_hidden,
            g->hw.p2p ? "" : " (through host memory it runs after backward)");
    if (g->wl.load_rate > 0)
        fprintf(f, "  DP's one process: %d loader worker%s at %.4g samples/s each for %d rows a step: "
                   "%s\n", g->wl.load_workers, g->wl.load_workers == 1 ? "" : "s", g->wl.load_rate,
                r->batch * r->devices, r->dp_input_bound ? "input-bound" : "not input-bound");
    else
        fprintf(f, "  DP input-bound: %s (the workload gives no load_samples_per_s: loading is not "
                   "modelled)\n", r->dp_input_bound ? "yes" : "no");
}

// ---------------------------------------------------------------------------
// --json

static cJSON *terms(const gpu_step_t *s)
{
    cJSON *o = cJSON_CreateObject();
    for (int t = 0; t < GT_COUNT; t++)
        cJSON_AddNumberToObject(o, gpu_term_key(t), s->term[t]);
    return o;
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
    if (g->wl.load_rate > 0)
        cJSON_AddNumberToObject(ld, "samples_per_s_per_worker", g->wl.load_rate);
    else
        cJSON_AddNullToObject(ld, "samples_per_s_per_worker");
    cJSON_AddNumberToObject(ld, "workers_per_process", g->wl.load_workers);
    cJSON *rows = cJSON_AddArrayToObject(o, "rows");
    for (int k = 0; k < g->hw.count; k++) {
        const gpu_row_t *r = &g->rows[k];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "devices", r->devices);
        cJSON_AddNumberToObject(x, "batch_per_device", r->batch);
        cJSON_AddNumberToObject(x, "single_s", r->single.step);
        cJSON_AddNumberToObject(x, "dp_s", r->dp.step);
        cJSON_AddNumberToObject(x, "ddp_s", r->ddp.step);
        cJSON_AddBoolToObject(x, "dp_input_bound", r->dp_input_bound);
        cJSON_AddStringToObject(x, "dp_slower_term", gpu_term_key(gpu_model_dp_culprit(r)));
        cJSON_AddNumberToObject(x, "ddp_all_reduce_hidden_s", r->ddp_hidden);
        cJSON_AddItemToObject(x, "single_terms_s", terms(&r->single));
        cJSON_AddItemToObject(x, "dp_terms_s", terms(&r->dp));
        cJSON_AddItemToObject(x, "ddp_terms_s", terms(&r->ddp));
        cJSON_AddItemToArray(rows, x);
    }
    if (g->check[0])
        cJSON_AddStringToObject(o, "check", g->check);
    else
        cJSON_AddNullToObject(o, "check");
    return o;
}

// ---------------------------------------------------------------------------
// the page: throughput on 1..count GPUs, single flat, DP and DDP as curves
// (drawn on app/report's plot, page_plot_*)

typedef struct {
    const gpu_lesson_t *g;
    int mode; /* 0 single, 1 dp, 2 ddp */
} curve_t;

static const gpu_step_t *step_of(const gpu_row_t *r, int mode)
{
    return mode == 0 ? &r->single : mode == 1 ? &r->dp : &r->ddp;
}

static void modelled_title(FILE *f, int k, double v, const void *arg)
{
    const curve_t *c = arg;
    static const char *const name[3] = {"single", "dp", "ddp"};
    fprintf(f, "%s on %d GPU%s, modelled: %.1f samples/s, %.3f ms a step", name[c->mode], k,
            k == 1 ? "" : "s", v, 1e3 * step_of(&c->g->rows[k - 1], c->mode)->step);
}

void svg_gpu(FILE *f, const void *arg)
{
    const gpu_lesson_t *g = arg;
    int n = g->hw.count;
    double v[3][GPU_MAX_DEVICES];
    page_plot_t pl = {n, 0.0};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < n; k++) {
            const gpu_row_t *r = &g->rows[k];
            v[m][k] = thr(g, r, step_of(r, m), m == 0);
            pl.top = fmax(pl.top, v[m][k]);
        }
    fputs("<div class=\"gpu-lesson\" id=\"gpu-lesson\"><h3>Modelled for ", f);
    page_esc(f, g->hw.name);
    fputs(" (", f);
    page_esc(f, g->wl.name);
    fputs(", not measured)</h3>\n<p class=\"note\">", f);
    page_esc(f, g->check[0] ? g->check : "no published case on this box");
    fputs("</p>\n", f);
    page_plot_open(f, &pl, "modelled GPU throughput");
    static const char *const mode[3] = {"gpu-single", "gpu-dp", "gpu-ddp"};
    static const char *const cls[3] = {"single", "dpline", "ddpline"};
    static const char *const label[3] = {"single", "dp", "ddp"};
    for (int m = 0; m < 3; m++) {
        curve_t c = {g, m};
        page_plot_curve(f, &pl, mode[m], cls[m], v[m], label[m], 12.0 * (m - 1), modelled_title, &c);
    }
    char line[512];
    sentence(line, sizeof line, g);
    fputs("</svg>\n<p class=\"note\">", f);
    page_esc(f, line);
    fputs("</p></div>\n", f);
}
