/* app/report/report_page.h: --report FILE.html, one self-contained page
 * (report_html.c writes it, report_svg.c draws its figures).  Every field but
 * the runs may be absent; each section says what would fill it. */
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

/* The timed step a run's timeline shows: the recorded step (1-based; 0: none)
 * whose slowest device's time is closest to the median, the span drawn
 * [t0, t1] over every device, and its time. */
typedef struct {
    int step;
    double t0, t1, dur;
    int recorded;        /* timed steps recorded (the first TRACE_MAX_STEPS) */
    int first, last;     /* their step numbers */
} page_step_t;
void report_page_pick_step(const run_result_t *r, page_step_t *out);

// ---------------------------------------------------------------------------
// inside the page writer (report_html.c and report_svg.c)

/* page.css and page.js as C strings (the Makefile). */
extern const char report_page_css[];
extern const char report_page_js[];

#define FIG_W 960
#define LABEL_W 170
#define BAR_H 20

/* Text escaped for HTML; run i's label (its mode's name by default). */
void page_esc(FILE *f, const char *s);
const char *page_run_label(const report_page_t *p, int i);
void page_svg_open(FILE *f, int h, const char *aria); /* a figure FIG_W wide, h high */
/* A figure's label and its tail (" rank 0") at y, shortened to fit. */
void page_label(FILE *f, int y, const char *label, const char *tail);
/* The figures (report_svg.c); each returns the count of what it drew. */
int svg_timelines(FILE *f, const report_page_t *p);
int svg_phase_bars(FILE *f, const report_page_t *p);
int svg_memory_bars(FILE *f, const report_page_t *p);
int svg_predict(FILE *f, const report_page_t *p);
/* The section of the share of each device's peak (report_peak.c). */
void page_peak_section(FILE *f, const report_page_t *p);
/* --hardware's chart: single, DP and DDP modelled on 1..count GPUs */
void svg_gpu(FILE *f, const gpu_lesson_t *g);

#endif
