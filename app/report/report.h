/* app/report/report.h: what the user reads: the banner, the result tables,
 * compare's side-by-side view, and the machine-readable forms (--json, --csv,
 * --trace, --baseline, --explain); app/report/README.md lists its files.
 * Nothing here exits: functions return DDP_OK / DDP_ERR_* with one line in
 * err, and app/main.c decides. */
#ifndef DDPBENCH_REPORT_H
#define DDPBENCH_REPORT_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/nn/model.h"
#include "common/measure/collperf.h"
#include "app/predict/gpu_model.h"
#include "app/predict/predict.h"
#include "app/repeat/repeat.h"
#include "common/measure/result.h"
#include "common/train/strategy.h"

#define REPORT_SCHEMA_VERSION 1

/* Compare's equivalence verdict (docs/results.md says why): relative L2
 * within REPORT_AGREE_L2 and the worst parameter within REPORT_AGREE_MAX
 * relative (SGD) or REPORT_AGREE_STEP of lr x steps (Adam, AdamW). */
#define REPORT_AGREE_L2 1e-5
/* --precision bf16: relative L2 alone (docs/gpu.md), 1e-3 up to 12 steps,
 * then growing as measured: (N/12)^1.3. */
#define REPORT_AGREE_L2_BF16 1e-3
#define REPORT_AGREE_BF16_STEPS 12
#define REPORT_AGREE_BF16_GROWTH 1.3
#define REPORT_AGREE_MAX 1e-3
#define REPORT_AGREE_STEP 0.1
#define REPORT_REL_FLOOR 1e-3

/* What every report of a session shares. */
typedef struct {
    const config_t *cfg;      /* the user's config (mode compare, or the mode run) */
    const model_spec_t *spec;
    const dataset_t *data;
    const char *backend_note; /* what --backend auto chose, or NULL */
    const predict_in_t *pred; /* the alpha-beta model's inputs (compare, --predict), or NULL */
    const repeat_t *const *reps; /* --repeat: reps[i] holds the runs of runs[i], or NULL */
} report_ctx_t;

/* Figures derived from a run (and from the single run it is compared with). */
typedef struct {
    double step_mean, step_p50, step_p95, step_min, step_max; /* seconds */
    double step_p10, step_p25;  /* the low quantiles (the A/B gate's alternatives, docs/gate.md) */
    double phase[MAX_DEVICES][PH_COUNT]; /* seconds per timed step, per device */
    double rows_per_step[MAX_DEVICES];
    double host_syncs[MAX_DEVICES]; /* host waits per timed step (NAN: not counted) */
    double host_syncs_max; /* the most of any device (NAN: none counted) */
    /* work queued per timed step on each device, by kind (NAN: not counted) */
    double launch_split[MAX_DEVICES][LAUNCH_KINDS];
    double launches[MAX_DEVICES];
    int launches_max_dev;  /* the device that queued the most (-1: none counted) */
    /* CPU seconds of work per timed step: mean, p10, p25, p50 per device and
     * the most of any device (NAN: not measured, a GPU) */
    double work_cpu[MAX_DEVICES][4];
    double work_cpu_max[4];
    size_t mem_peak_max;
    /* FLOP/s per device and its share of the peak (NAN: unknown or over
     * REPORT_SHARE_MAX), and all devices' together */
    double flops[MAX_DEVICES], share[MAX_DEVICES];
    double flops_all, share_all;
    /* against single (has_ref) */
    bool has_ref;
    double speedup;      /* throughput / single's */
    double efficiency;   /* speedup / devices */
    bool params_compared;
    double max_rel;      /* max_rel_diff(params, single's, REPORT_REL_FLOOR) */
    double rel_l2;       /* |params - single's| / |single's| */
    double max_step;     /* max |params - single's| / (lr x steps): Adam's unit */
    bool adam;           /* the worst parameter is judged by max_step, not max_rel */
    bool agree;
} report_stats_t;

/* What report_stats_apportion moved: each device's own descheduled time and
 * the machine's share of each wait phase (kept apart from report_stats_t). */
typedef struct {
    double desched[MAX_DEVICES];
    double machine[MAX_DEVICES][PH_COUNT];
} report_machine_t;

#define REPORT_SHARE_MAX 1.2 /* a share of the peak above this is a disturbed peak */

/* ref: the single run to compare with, or NULL. */
void report_stats(const run_result_t *r, const run_result_t *ref, report_stats_t *s);
/* The fraction of device d's waits that is the machine's (docs/results.md,
 * "The machine's share"; 0 with no waits), from ph[device][phase]. */
double report_machine_frac(const double (*ph)[PH_COUNT], int ndev, int d);
/* Move the machine's share of each device's waits into its PH_DESCHED (its
 * machine time); the phases still add up to the step.  m (may be NULL) gets
 * what moved. */
void report_stats_apportion(report_stats_t *s, int ndev, report_machine_t *m);

/* -- text ------------------------------------------------------------------ */
/* One paragraph: mode, backend, devices, model, data, batch, steps. */
void report_banner(FILE *f, const report_ctx_t *ctx);
/* The result table of one run; ref (may be NULL) adds speed-up and efficiency. */
void report_result(FILE *f, const report_ctx_t *ctx, const run_result_t *r,
                   const run_result_t *ref);
/* Compare mode: runs[0..n) side by side, whether they agree, and why. */
void report_compare(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n);
/* Compare's note on the samples every mode read, "" when nothing to say. */
void report_stream_note(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *ref);
/* Why run r's parameters differ from single's (ref). */
void report_differ_cause(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r,
                         const run_result_t *ref, bool relu_said);
/* Compare's sentences, at most three, one a line (report_why.c). */
void report_compare_verdict(char *buf, size_t len, const report_ctx_t *ctx,
                            const run_result_t *runs, int n);
/* Compare's notes (the CPU, a busy machine): up to max; returns how many. */
int report_compare_notes(const report_ctx_t *ctx, const run_result_t *runs, int n,
                         char notes[][256], int max);
/* --explain: where the time goes in each mode, and the gap between them. */
void report_compare_why(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *runs,
                        int n);
/* The reason for the verdict: what the split saved against what the mode
 * adds, and at what model size DDP starts to win (ctx->pred). */
void report_compare_reason(char *buf, size_t len, const report_ctx_t *ctx,
                           const run_result_t *runs, int n);
/* The same for one dp or ddp run against ctx->pred's single; "" without. */
void report_run_reason(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r);
/* --explain: the first step in plain sentences. */
void report_explain(FILE *f, const report_ctx_t *ctx, const run_result_t *r);

/* The notes under a result: up to max into notes; returns how many. */
int report_notes_of(const report_ctx_t *ctx, const run_result_t *r, char notes[][256], int max);
/* The same as "  note: ..." lines (name_mode: "dp: " before each). */
void report_notes(FILE *f, const report_ctx_t *ctx, const run_result_t *r, bool name_mode);
/* The notes of runs[0..n), a note the runs share said once. */
void report_notes_runs(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n);

/* DDP: each bucket's all-reduce and its bus bandwidth against --mode comm's
 * (ar, may be NULL), as text and as the "buckets" JSON array (null outside
 * DDP).  zero1: the buckets were reduce-scattered (not comparable with ar). */
void report_buckets(FILE *f, const run_result_t *r, const collperf_coll_t *ar, bool zero1);
/* --comm-hook (report_hook.c): the bytes sent against plain DDP's and the
 * drift from the plain run (r->hook_ref); nothing without a hook. */
void report_hook(FILE *f, const config_t *c, const run_result_t *r);
/* The same as the "comm_hook" JSON object (null without a hook). */
cJSON *report_json_hook(const config_t *c, const run_result_t *r);
/* ||a - b|| / ||b|| (NAN: not comparable); the largest |a_i - b_i| in *max_abs. */
double report_param_distance(const run_result_t *a, const run_result_t *b, double *max_abs);
cJSON *report_json_buckets(const run_result_t *r, const collperf_coll_t *ar, bool zero1);
/* DDP: its all-reduce's bus bandwidth over every bucket (*busbw) and its share
 * of what --mode comm's (ar) reaches at the same sizes; NAN where unknown. */
double report_bus_share(const run_result_t *r, const collperf_coll_t *ar, bool zero1,
                        double *busbw);
/* --explain's lines: how far each device is from its peak and why (report_peak.c). */
void report_explain_peak(FILE *f, const report_ctx_t *ctx, const run_result_t *r,
                         const report_stats_t *s);
/* --bucket-mb auto: the caps tried in the warm-up and the one chosen. */
void report_autotune(FILE *f, const config_t *cfg, const run_result_t *r);

/* The mean seconds per step of phase p over device slots [first, last]. */
double report_phase_mean(const report_stats_t *s, int first, int last, int p);
/* Phase names as a mode calls them ("gather+loss" for DP's loss). */
const char *report_phase_label(mode_t_ mode, phase_t p);
/* The BLAS threads per device of a run of mode m (report_env.c). */
int report_threads(const config_t *c, mode_t_ m);
/* Whether phase p gets a row in a table printed at `unit` per second. */
bool report_phase_shown(const report_stats_t *s, int ndev, phase_t p, double unit);
/* Seconds per step of device d's phases but comm hidden (which overlaps backward). */
double report_phase_sum(const report_stats_t *s, int d);

/* printf into buf[len] at *used and advance it (cut short when full). */
void report_appendf(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "1.23 ms", "456.0 us", "7.890 s" */
const char *report_fmt_time(char *buf, size_t n, double seconds);
/* "12.3 MiB" */
const char *report_fmt_bytes(char *buf, size_t n, double bytes);
/* "64-512-512-10" */
void report_layers(char *buf, size_t n, const model_spec_t *s);

/* -- machine-readable ------------------------------------------------------ */
/* The "config" object (what --baseline compares): run_cfg is the run's own
 * config, r its result or NULL before a run. */
cJSON *report_json_config(const report_ctx_t *ctx, const config_t *run_cfg,
                          const run_result_t *r);
/* The "environment" object. */
cJSON *report_json_env(const report_ctx_t *ctx, const run_result_t *r);
/* One run's JSON object (NULL: out of memory); ref: compare's single, or NULL. */
cJSON *report_json_run(const report_ctx_t *ctx, const config_t *run_cfg, const run_result_t *r,
                       const run_result_t *ref, bool in_compare);
/* A run's disturbance record as the "machine" object (null when not taken). */
cJSON *report_json_machine(const disturb_t *d);
/* --mode comm: the nccl-tests tables (report_comm.c), and the same as JSON. */
void report_comm(FILE *f, const collperf_t *r);
cJSON *report_json_comm(const report_ctx_t *ctx, const collperf_t *r);
/* v under key k of o, null when it is not a finite number (JSON has none). */
void report_json_num(cJSON *o, const char *k, double v);
/* s under key k of o, null when s is NULL (inline: report_env.c uses it too). */
static inline void report_json_str(cJSON *o, const char *k, const char *s)
{
    if (s)
        cJSON_AddStringToObject(o, k, s);
    else
        cJSON_AddNullToObject(o, k);
}
/* Print obj on one line plus '\n'. */
int report_json_print(FILE *f, const cJSON *obj);
/* The key paths every run object carries, NULL-terminated (walked by tests). */
const char *const *report_json_keys(void);

/* CSV: the header line, and one row per run. */
void report_csv_header(FILE *f);
/* rep: the run's --repeat runs (NULL or one run: the interval columns empty) */
void report_csv_row(FILE *f, const report_ctx_t *ctx, const config_t *run_cfg,
                    const run_result_t *r, const run_result_t *ref, const repeat_t *rep);

/* The banner's provenance lines: build, BLAS, host, CPUs, start; CUDA's versions. */
void report_provenance(FILE *f, const report_ctx_t *ctx);
/* Note the run's start (time, load average): call before training. */
void report_start(void);
/* The source revision compiled in ("unknown" outside a git checkout). */
const char *report_revision(void);
/* The host name, the run's start (UTC, ISO 8601), its 1-minute load average. */
const char *report_host(void);
const char *report_time_utc(void);
const char *report_loadavg1(void);
/* A device's display name (its stats' name, or one found for the backend). */
void report_device_name(char *buf, size_t n, backend_kind_t b, const device_stats_t *d);

/* --repeat (report_repeat.c): the "repeat" JSON object, the text table. */
cJSON *report_json_repeat(const repeat_t *r);
void report_repeat(FILE *f, const repeat_t *const *runs, const mode_t_ *modes, int nmodes);
/* --predict (report_predict.c): the table for 1..8 devices, compare's
 * predicted next to measured, the "predict" JSON object (r may be NULL). */
void report_predict_table(FILE *f, const predict_in_t *in, const predict_row_t *rows);
void report_predicted(FILE *f, const run_result_t *runs, int n, const predict_row_t *rows);
cJSON *report_json_predict(const predict_in_t *in, const predict_row_t *rows,
                           const run_result_t *r);
double report_rate(const predict_in_t *in, double step_s); /* samples/s of a step */
/* --hardware's GPU lesson (report_gpu.c): table, sentence, --explain, JSON. */
void report_gpu(FILE *f, const gpu_lesson_t *g);
void report_gpu_sentence(char *out, size_t n, const gpu_lesson_t *g);
void report_gpu_explain(FILE *f, const gpu_lesson_t *g);
cJSON *report_json_gpu(const gpu_lesson_t *g);
/* -- --trace --------------------------------------------------------------- */
/* Check early that FILE can be written (its folder exists and is writable). */
int report_trace_check(const char *path, char *err);
/* Write runs[0..n)'s recorders as one Chrome trace (atomically, via a rename). */
int report_trace_write(const char *path, const run_result_t *runs, int n, char *err);

#endif
