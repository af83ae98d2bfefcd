/* common/measure/progress.h: the one updating progress line on stderr.
 *
 * Shown only when stderr is a terminal and --quiet is off; then at most about
 * ten times a second (progress_update returns after one clock read on every
 * other step: no formatting on the hot path).  The line is rewritten in place
 * with '\r' and erased by progress_clear (before any other output, e.g. a loss
 * line) and progress_end.  One writer: the step meter of single's loop, DP's
 * device 0 thread, DDP's rank 0.  Every function takes NULL for "no line here".
 *
 * Its loss is the latest one the loss log took (--log-every; each epoch by
 * default), with its step: decided from the steps already logged, so no mode
 * fetches a loss, or all-reduces one, for the line's sake; an epoch's tail
 * step (fewer rows than a whole step: its loss a mean over those alone) is
 * named so.  Before the first logged step it shows the step count and times
 * alone. */
#ifndef DDPBENCH_PROGRESS_H
#define DDPBENCH_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include "common/config/config.h"
#include "common/measure/timing.h"

#define PROGRESS_PERIOD_S 0.1

typedef struct {
    bool on;
    FILE *f;
    char label[16];     /* the mode: "single", "dp", "ddp" */
    long total;         /* optimizer steps in the run */
    double t_start;
    double next_s;      /* earliest time of the next update */
    double last_s;      /* time of the last update */
    long last_samples;  /* samples done at the last update */
    double loss;        /* the latest logged loss handed in (NAN: none yet) */
    long loss_step;     /* its step (1-based) */
    long loss_rows;     /* its global rows, and a whole step's (the most seen): an */
    long rows_full;     /* epoch's tail step is a mean over fewer, said as such */
    long seen;          /* samples at the last call */
    bool shown;         /* a line is on the screen */
} progress_t;

/* label: the mode's name; total: optimizer steps.  Decides on/off once. */
void progress_init(progress_t *p, const config_t *c, const char *label, long total);
/* Same, with the terminal test given (for tests; f may be any stream). */
void progress_init_on(progress_t *p, bool on, FILE *f, const char *label, long total);

/* After step `step` (1-based) of epoch `epoch` (0-based), `samples` global
 * samples done in all; loss: this step's when the loss log took it, else NAN
 * (the line keeps showing the last one). */
void progress_update(progress_t *p, long step, long epoch, double loss, long samples);
/* Erase the line (it comes back at the next update). */
void progress_clear(progress_t *p);
/* Erase the line for good. */
void progress_end(progress_t *p);

#endif
