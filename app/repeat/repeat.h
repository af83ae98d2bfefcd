/* app/repeat/repeat.h: --repeat N, statistics across independent runs.  Each run is reduced
 * to its summary from its run record's totals (never per-step arrays); the N summaries give
 * each figure's median and 95% interval (docs/results.md, "--repeat": Student's t, on the
 * logs for a figure positive in every run), which the gate (gate/baseline.c) judges. */
#ifndef DDPBENCH_REPEAT_H
#define DDPBENCH_REPEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config/config.h"
#include "common/measure/result.h"

#define REPEAT_MAX CONFIG_REPEAT_MAX

/* One run, as far as repeats need it. */
typedef struct {
    double samples_per_s;
    double step_mean_s;          /* timed seconds / timed steps */
    double step_median_s;        /* the median timed step: one interrupted step cannot move it */
    double median_samples_per_s; /* samples per timed step / step_median_s */
    double mem_peak_bytes;       /* the largest device's */
    double work_p10;             /* the CPU work: the busiest device's work_cpu_p10 (NAN: none,
                                    a GPU run) */
    double phase_s[PH_COUNT];    /* seconds per timed step, mean over the devices */
    uint64_t checksum_bits;
    disturb_t machine;           /* the run's disturbance record */
} run_summary_t;

typedef struct {
    int n;
    double median, mean;
    double lo, hi;               /* the 95% interval (of the geometric mean for a positive
                                    figure); NAN when n < 2 */
} interval_t;

/* The summary of a finished run. */
void run_summary_of(const run_result_t *r, run_summary_t *out);
/* Median and 95% interval of v[0..n). */
interval_t interval_of(const double *v, int n);
/* Student's t quantile t(0.975, df) (df >= 1; a fractional df, Welch's,
 * rounds down). */
double student_t975(int df);

/* The ratio of two sets of independent runs of a positive figure, cand[]
 * over base[]: exp of the difference of their mean logs, and its 95%
 * interval by Welch's t on the logs (each side's own spread, the
 * Welch-Satterthwaite degrees of freedom).  A side of one run takes the
 * other side's spread (as one more run of it).  false when both sides have
 * one run, or a figure is not positive. */
typedef struct {
    double ratio, lo, hi; /* cand / base */
    int nbase, ncand;
    double df;
} ratio_interval_t;
bool ratio_interval_of(const double *base, int nb, const double *cand, int nc,
                       ratio_interval_t *out);

/* The runs of one mode. */
typedef struct {
    int n;
    run_summary_t run[REPEAT_MAX];
    int retaken;                 /* disturbed runs dropped and taken again */
} repeat_t;

/* Figures of a summary, for repeat_interval(). */
typedef enum {
    FIG_THROUGHPUT = 0,
    FIG_STEP_MEAN,
    FIG_MEM_PEAK,
    FIG_STEP_MEDIAN,
    FIG_MEDIAN_THROUGHPUT,
    FIG_WORK_P10,
    FIG_PHASE0,              /* FIG_PHASE0 + p: phase p */
    FIG_COUNT = FIG_PHASE0 + PH_COUNT
} figure_t;

double run_summary_figure(const run_summary_t *s, int fig);
void repeat_add(repeat_t *r, const run_result_t *res);
interval_t repeat_interval(const repeat_t *r, int fig);
/* Runs of r whose disturbance record says `disturbed`; the median of their
 * contention into *contention (0 when none, may be NULL). */
int repeat_disturbed(const repeat_t *r, double *contention);
/* Relative width of an interval: (hi - lo) / |mean| in percent (0 for
 * fewer than 2 runs). */
double interval_width_pct(interval_t iv);

#endif
