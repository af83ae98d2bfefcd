/* app/report/report_page.h: --report FILE.html, one self-contained page per
 * invocation (report_html.c writes it, report_svg.c draws its figures).
 *
 * The page reads what the terminal report reads: the runs and their configs,
 * --repeat's runs and --predict's model.  Every field but the runs may be
 * absent; each section says what would fill it.  The figures are SVG written here, so the
 * page needs no script and fetches nothing (its Content-Security-Policy
 * forbids any request); the script it carries only adds hover highlights. */
#ifndef DDPBENCH_REPORT_PAGE_H
#define DDPBENCH_REPORT_PAGE_H

#include <stdbool.h>
#include <stdio.h>

#include "app/predict/predict.h"
#include "app/repeat/repeat.h"
#include "common/measure/result.h"
#include "app/report/report.h"

#define PAGE_MAX_RUNS 4

typedef struct {
    const report_ctx_t *ctx;    /* the user's config, model, data */
    const char *title;          /* "compare", "scenario dp-device0: ...": the heading */
    const config_t *cfgs;       /* each run's config */
    const run_result_t *runs;   /* the runs, in the order shown (single first) */
    const char *const *labels;  /* each run's column title, or NULL: its mode's name */
    int n;
    const repeat_t *reps;       /* each run's --repeat runs (n > 1: intervals), or NULL */
    const predict_in_t *pred;   /* --predict's model inputs, or NULL */
    const predict_row_t *rows;  /* its 1..PREDICT_MAX_DEVICES rows */
    const char *story;          /* a scenario's verdict line, or NULL */
    const gpu_lesson_t *gpu;    /* --hardware's model of a GPU box, or NULL */
} report_page_t;

/* Check early that FILE can be written (as --trace's check). */
int report_page_check(const char *path, char *err);
/* Write the page: to a temporary file beside path, renamed over it. */
int report_page_write(const char *path, const report_page_t *p, char *err);

/* The timed step a run's timeline shows: the recorded step whose time (the
 * slowest device's own step, as the run's step times count it) is closest
 * to the run's median step time.  Its step number (1-based; 0 when nothing
 * was recorded), the span drawn [t0, t1] (the first device's start to the
 * last one's end) and its time. */
typedef struct {
    int step;
    double t0, t1, dur;
    int recorded;        /* timed steps recorded (the first TRACE_MAX_STEPS) */
    int first, last;     /* their step numbers */
} page_step_t;
void report_page_pick_step(const run_result_t *r, page_step_t *out);

// ---------------------------------------------------------------------------
// inside the page writer (report_html.c and report_svg.c)

/* The page's style sheet and script (app/report/page.css, page.js), made
 * into C strings by the Makefile. */
extern const char report_page_css[];
extern const char report_page_js[];

/* The figures' geometry: their width (CSS scales them down), the lane or
 * bar labels' width, a bar's height. */
#define FIG_W 960
#define LABEL_W 170
#define BAR_H 20

/* Text escaped for HTML (report_svg.c: the figures use it, and the page). */
void page_esc(FILE *f, const char *s);
/* A figure's label, ending at LABEL_W - 6 at height y: the run's label and
 * its tail (" rank 0"), the label shortened to fit (the whole in its title). */
void page_label(FILE *f, int y, const char *label, const char *tail);
/* The figures (report_svg.c); each returns the count of what it drew (lanes,
 * bars, points) so the writer can say when there was nothing. */
int svg_timelines(FILE *f, const report_page_t *p);
int svg_phase_bars(FILE *f, const report_page_t *p);
int svg_memory_bars(FILE *f, const report_page_t *p);
int svg_predict(FILE *f, const report_page_t *p);
/* The section of the share of each device's peak (report_peak.c). */
void page_peak_section(FILE *f, const report_page_t *p);
/* --hardware's chart: single, DP and DDP modelled on 1..count GPUs */
void svg_gpu(FILE *f, const gpu_lesson_t *g);

#endif
