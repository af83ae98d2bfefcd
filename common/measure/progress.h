/* common/measure/progress.h: the one updating progress line on stderr (docs/results.md):
 * on a terminal without --quiet, redrawn at most about ten times a second (one clock
 * read on the other steps), erased by progress_clear before other output.  One writer
 * (the step meter that draws it); every function takes NULL for "no line here". */
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

/* After step `step` (1-based) of epoch (0-based), `samples` done in all; loss: this
 * step's when the loss log took it, else NAN (the line shows the last one). */
void progress_update(progress_t *p, long step, long epoch, double loss, long samples);
/* Erase the line (it comes back at the next update). */
void progress_clear(progress_t *p);
/* Erase the line for good. */
void progress_end(progress_t *p);

#endif
