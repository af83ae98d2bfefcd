/* app/report/report.h: what the user reads: the banner before a run, the result
 * table after it, compare mode's side-by-side view, and the machine-readable
 * forms (--json, --csv, --trace, --baseline, --explain).
 *
 * Nothing here exits or decides an exit status: functions return DDP_OK /
 * DDP_ERR_INPUT / DDP_ERR_RUNTIME with one line in err,
 * and app/main.c decides.  Files:
 *   report.c          formatting helpers, the banner, derived figures
 *   report_table.c    the result table of one run
 *   report_compare.c  compare mode: side by side, equivalence
 *   report_why.c      the sentences: compare's verdict, --explain's why
 *   report_verdict.c  compare mode: the samples read, why parameters differ
 *   report_json.c     --json (schema in README.md), report_env.c its environment
 *   report_comm.c     --mode comm's tables and JSON
 *   report_csv.c      --csv
 *   report_trace.c    --trace (Chrome trace event JSON)
 *   report_explain.c  --explain */
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

/* Equivalence verdict of compare mode (see report_compare.c for why these
 * measures): agree when the relative L2 distance of the parameter vectors is
 * within REPORT_AGREE_L2 and the worst single parameter is within what
 * rounding can do under the run's optimizer: for SGD (an update linear in
 * the gradient) REPORT_AGREE_MAX relative (max_rel_diff with a floor of
 * 1e-3); for Adam and AdamW (an update of about lr whatever the gradient's
 * size) REPORT_AGREE_STEP of the farthest a parameter can move, lr x steps. */
#define REPORT_AGREE_L2 1e-5
/* Under --precision bf16: the bf16 row of the contract, relative L2 alone
 * (docs/gpu.md: a bf16 rounding boundary crossed moves a value by 2^-8, so
 * no per-parameter bound holds), 1e-3 up to 12 steps and growing beyond
 * them as measured (x6 from 12 to 50 Adam steps: (N/12)^1.3). */
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
    const predict_in_t *pred; /* the alpha-beta model's inputs when the collectives were
                                 measured (compare, --predict), else NULL */
    const repeat_t *const *reps; /* --repeat: reps[i] holds the runs of runs[i] (compare's
                                    order), or NULL */
} report_ctx_t;

/* Figures derived from a run (and from the single run it is compared with). */
typedef struct {
    long timed_steps;
    double step_mean, step_p50, step_p95, step_min, step_max; /* seconds */
    double step_p10, step_p25;  /* the low quantiles (the A/B gate's alternatives, docs/gate.md) */
    double phase[MAX_DEVICES][PH_COUNT]; /* seconds per timed step, per device */
    double rows_per_step[MAX_DEVICES];
    /* times per timed step the host waited for each device (NAN: not counted) */
    double host_syncs[MAX_DEVICES];
    double host_syncs_max; /* the most of any device (NAN: none counted) */
    /* work queued per timed step on each device, by kind (NAN: not counted);
     * launches: kernels + copies + collectives + graph launches */
    double launch_split[MAX_DEVICES][LAUNCH_KINDS];
    double launches[MAX_DEVICES];
    int launches_max_dev;  /* the device that queued the most (-1: none counted) */
    /* CPU seconds of work per timed step (step_meter.c's work_cpu), each
     * device's mean, p10, p25 and p50, and the most of any device for each
     * (the step waits for its busiest device); NAN: not measured (a GPU) */
    double work_cpu[MAX_DEVICES][4];
    double work_cpu_max[4];
    size_t mem_peak_max;
    /* How far from the machine: each device's FLOP/s over the timed steps'
     * wall time and its share of the device's peak (NAN: unknown, or over
     * REPORT_SHARE_MAX, which no step reaches: the peak's measurement was
     * interrupted both times), and every device's together (their FLOP/s
     * over the sum of their peaks) */
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

/* What report_stats_apportion moved: each device's own descheduled time
 * (phase[][PH_DESCHED] is then its machine time), and the machine's share of
 * each of its wait phases (taken out of phase[][]).  Apart from
 * report_stats_t, whose frame the reports keep on their stacks. */
typedef struct {
    double desched[MAX_DEVICES];
    double machine[MAX_DEVICES][PH_COUNT];
} report_machine_t;

#define REPORT_SHARE_MAX 1.2 /* a share of the peak above this is a disturbed peak */

/* ref: the single run to compare with, or NULL. */
void report_stats(const run_result_t *r, const run_result_t *ref, report_stats_t *s);
/* The machine's share of a wait (docs/results.md, "The machine's share"):
 * of device d's waits (the phases phase_waits names: where it may wait for
 * another device), the part the longest another device of the run was
 * descheduled explains, at most all of them; the rest is the strategy's.
 * The fraction of d's waits that is the machine's (0 with no waits), from
 * phases per step ph[device][phase]. */
double report_machine_frac(const double (*ph)[PH_COUNT], int ndev, int d);
/* What the sentences read: every device's waits less the machine's share,
 * spread over its wait phases in proportion to their time, and that share
 * added to its PH_DESCHED, which becomes its machine time (descheduled, or
 * waiting for a device that was); the phases still add up to the step.
 * m (may be NULL) gets what moved. */
void report_stats_apportion(report_stats_t *s, int ndev, report_machine_t *m);

/* -- text ------------------------------------------------------------------ */
/* One paragraph: mode, backend, devices, model, data, batch, steps. */
void report_banner(FILE *f, const report_ctx_t *ctx);
/* The result table of one run; ref (may be NULL) adds speed-up and efficiency. */
void report_result(FILE *f, const report_ctx_t *ctx, const run_result_t *r,
                   const run_result_t *ref);
/* Compare mode: runs[0..n) side by side (single first when present), whether
 * their parameters agree, and the sentences on where the time goes. */
void report_compare(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n);
/* Compare's note on the samples every mode read (padding, a --drop-last
 * cut, per-rank shards, --batch-per-device's global batch), one paragraph a
 * line; "" when there is nothing to say.  ref: the single run. */
void report_stream_note(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *ref);
/* Why run r's parameters differ from single's (ref): another sample stream,
 * ReLU's kink (once: relu_said), or a real difference. */
void report_differ_cause(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r,
                         const run_result_t *ref, bool relu_said);
/* Compare's sentences (report_why.c), at most three, one a line: the speed-ups
 * and whether DP and DDP differ beyond the noise (ctx->reps' intervals, or
 * one run's noise), what DP's device 0 does alone, DDP's all-reduce against
 * backward. */
void report_compare_verdict(char *buf, size_t len, const report_ctx_t *ctx,
                            const run_result_t *runs, int n);
/* Compare's notes: what a CPU run does not reproduce of GPUs, and, for one
 * run (no --repeat), a machine that disturbed it (its `machine` record).  Up
 * to max lines into notes; returns how many. */
int report_compare_notes(const report_ctx_t *ctx, const run_result_t *runs, int n,
                         char notes[][256], int max);
/* --explain: where the time goes in each mode, and the gap between them
 * (called a difference only beyond the noise, as above), into buf. */
void report_compare_why(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *runs,
                        int n);
/* The reason for the verdict, into buf: per multi-device run, what
 * splitting the batch saved against what the mode adds per step (a tiny
 * model named as such, with the all-reduce's latency floor), and at what
 * model size DDP starts to win (ctx->pred: the alpha-beta model). */
void report_compare_reason(char *buf, size_t len, const report_ctx_t *ctx,
                           const run_result_t *runs, int n);
/* The same reason for one dp or ddp run against single's step as --predict's
 * single run measured it (ctx->pred's phases); "" without them. */
void report_run_reason(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r);
/* --explain: the first step in plain sentences. */
void report_explain(FILE *f, const report_ctx_t *ctx, const run_result_t *r);

/* The notes under a result: too few timed steps, step times too uneven for
 * the throughput to mean much, more CPU workers than cores.  Up to max
 * lines into notes; returns how many. */
int report_notes_of(const report_ctx_t *ctx, const run_result_t *r, char notes[][256], int max);
/* The same as "  note: ..." lines (name_mode: "dp: " before each). */
void report_notes(FILE *f, const report_ctx_t *ctx, const run_result_t *r, bool name_mode);
/* The notes of runs[0..n), a note the runs share said once ("note: single, dp,
 * ddp: only 18 timed steps: ..."). */
void report_notes_runs(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n);

/* DDP: each bucket's all-reduce in training, its bus bandwidth, and what
 * --mode comm's all-reduce (ar, may be NULL) reaches at that size: whether
 * the exposed communication is bandwidth-bound.  The text lines, and the
 * "buckets" JSON array (null outside DDP).  zero1: the buckets were
 * reduce-scattered (busbw x (n-1)/n, not 2(n-1)/n; not comparable with ar). */
void report_buckets(FILE *f, const run_result_t *r, const collperf_coll_t *ar, bool zero1);
/* --comm-hook (report_hook.c): what the hook sent per step against plain
 * DDP's bytes, and the drift from the plain run (r->hook_ref): the final
 * parameters' relative distance and the two loss curves.  Nothing without
 * a hook. */
void report_hook(FILE *f, const config_t *c, const run_result_t *r);
/* The same as the "comm_hook" JSON object (null without a hook). */
cJSON *report_json_hook(const config_t *c, const run_result_t *r);
/* ||a - b|| / ||b|| over the parameters (NAN when they cannot be compared),
 * and the largest |a_i - b_i| in *max_abs (may be NULL). */
double report_param_distance(const run_result_t *a, const run_result_t *b, double *max_abs);
cJSON *report_json_buckets(const run_result_t *r, const collperf_coll_t *ar, bool zero1);
/* DDP: the bus bandwidth of its all-reduce in training over every bucket
 * (*busbw, bytes/s) and its share of the link's, what --mode comm's
 * all-reduce (ar) takes at the same sizes; NAN without ar, buckets or an
 * all-reduce (zero1: reduce-scattered, not comparable). */
double report_bus_share(const run_result_t *r, const collperf_coll_t *ar, bool zero1,
                        double *busbw);
/* How far device d of r is from its peak, and what keeps it there
 * (report_peak.c), as a sentence ("" when its peak is unknown); --explain's
 * lines of them and of the bus bandwidth. */
void report_peak_sentence(char *buf, size_t len, const run_result_t *r, const report_stats_t *s,
                          int d);
void report_explain_peak(FILE *f, const report_ctx_t *ctx, const run_result_t *r,
                         const report_stats_t *s);
/* --bucket-mb auto: the caps tried in the warm-up and the one chosen. */
void report_autotune(FILE *f, const config_t *cfg, const run_result_t *r);

/* The mean seconds per step of phase p over device slots [first, last]. */
double report_phase_mean(const report_stats_t *s, int first, int last, int p);
/* Phase names as a mode calls them ("gather+loss" for DP's loss). */
const char *report_phase_label(mode_t_ mode, phase_t p);
/* The BLAS threads of a run of mode m under c: --threads for single's one
 * device, one per device for the others (report_env.c). */
int report_threads(const config_t *c, mode_t_ m);
/* Whether a phase gets a row in a table printed at `unit` per second: any
 * device spent time in it, or (skew, which may be negative) a visible amount. */
bool report_phase_shown(const report_stats_t *s, int ndev, phase_t p, double unit);
/* Seconds per step of device d's phases that add up to its step: all but
 * comm hidden, which overlaps backward (skew included, see step_meter.h). */
double report_phase_sum(const report_stats_t *s, int d);

/* printf into buf[len] at *used and advance it (cut short when full): for
 * building sentences piece by piece. */
void report_appendf(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "1.23 ms", "456.0 us", "7.890 s" */
const char *report_fmt_time(char *buf, size_t n, double seconds);
/* "12.3 MiB" */
const char *report_fmt_bytes(char *buf, size_t n, double bytes);
/* p-th percentile (0..100) of a copy of v[n], linear interpolation. */
double report_percentile(const double *v, long n, double p);
/* "64-512-512-10" */
void report_layers(char *buf, size_t n, const model_spec_t *s);

/* -- machine-readable ------------------------------------------------------ */
/* The "config" object of a run's JSON: also what --baseline compares.
 * run_cfg is the run's own config (compare gives each run its mode); r its
 * result, for what the run found out it could do (CUDA graphs that NCCL
 * refused), or NULL before a run. */
cJSON *report_json_config(const report_ctx_t *ctx, const config_t *run_cfg,
                          const run_result_t *r);
/* The "environment" object. */
cJSON *report_json_env(const report_ctx_t *ctx, const run_result_t *r);
/* One run's whole JSON object (NULL when out of memory).  ref: compare's
 * single run (adds the "compare" figures), or NULL. */
cJSON *report_json_run(const report_ctx_t *ctx, const config_t *run_cfg, const run_result_t *r,
                       const run_result_t *ref, bool in_compare);
/* A run's disturbance record as the "machine" object (null when not taken). */
cJSON *report_json_machine(const disturb_t *d);
/* --mode comm: the nccl-tests tables (report_comm.c), and the same as JSON. */
void report_comm(FILE *f, const collperf_t *r);
cJSON *report_json_comm(const report_ctx_t *ctx, const collperf_t *r);
/* v under key k of o, null when it is not a finite number (JSON has none). */
void report_json_num(cJSON *o, const char *k, double v);
/* Print obj on one line plus '\n'. */
int report_json_print(FILE *f, const cJSON *obj);
/* The key paths (dot separated) every run object carries, NULL-terminated:
 * the documented schema (the options' under "config" from the option
 * table), walked by the tests. */
const char *const *report_json_keys(void);

/* CSV: the header line, and one row per run. */
void report_csv_header(FILE *f);
/* rep: the run's --repeat runs (NULL or one run: the interval columns empty) */
void report_csv_row(FILE *f, const report_ctx_t *ctx, const config_t *run_cfg,
                    const run_result_t *r, const run_result_t *ref, const repeat_t *rep);

/* The banner's provenance lines: build (revision, compiler, flags), BLAS and
 * its threads, host, CPUs and start time; on CUDA the runtime, driver,
 * cuBLAS and NCCL versions, each GPU's name and PCI id, and peer access. */
void report_provenance(FILE *f, const report_ctx_t *ctx);
/* Note the run's start (time and load average) for its provenance: call
 * before training. */
void report_start(void);
/* The source revision compiled in ("unknown" outside a git checkout). */
const char *report_revision(void);
/* The host name, the run's start (UTC, ISO 8601) and its 1-minute load
 * average then ("unknown" when /proc/loadavg cannot be read). */
const char *report_host(void);
const char *report_time_utc(void);
const char *report_loadavg1(void);
/* A device's display name (its stats' name, or one found for the backend). */
void report_device_name(char *buf, size_t n, backend_kind_t b, const device_stats_t *d);

/* --repeat in the reports (report_repeat.c): the "repeat" JSON object (null
 * for fewer than 2 runs), and the text table of medians and intervals of
 * each mode's runs. */
cJSON *report_json_repeat(const repeat_t *r);
void report_repeat(FILE *f, const repeat_t *const *runs, const mode_t_ *modes, int nmodes);
/* --predict (report_predict.c): the table for 1..8 devices; compare's
 * predicted next to measured for its runs (and the phase the model missed
 * where they differ by more than 20%); the "predict" JSON object (this_run:
 * r's own device count, for dp and ddp runs; r may be NULL). */
void report_predict_table(FILE *f, const predict_in_t *in, const predict_row_t *rows);
void report_predicted(FILE *f, const run_result_t *runs, int n, const predict_in_t *in,
                      const predict_row_t *rows);
cJSON *report_json_predict(const predict_in_t *in, const predict_row_t *rows,
                           const run_result_t *r);
/* --hardware's GPU lesson (report_gpu.c): the table on 1..count GPUs with the
 * sentence naming the term that makes DP slower (the terminal's and the
 * page's), --explain's terms, and --json's "predict" object. */
void report_gpu(FILE *f, const gpu_lesson_t *g);
void report_gpu_sentence(char *out, size_t n, const gpu_lesson_t *g);
void report_gpu_explain(FILE *f, const gpu_lesson_t *g);
cJSON *report_json_gpu(const gpu_lesson_t *g);
/* -- --trace --------------------------------------------------------------- */
/* Check early that FILE can be written (its folder exists and is writable). */
int report_trace_check(const char *path, char *err);
/* Write runs[0..n)'s recorders as one Chrome trace: to a temporary file in the
 * same folder, then renamed over path.  Nothing is left behind on failure. */
int report_trace_write(const char *path, const run_result_t *runs, int n, char *err);

#endif
