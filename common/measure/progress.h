/* common/measure/progress.h: the one updating progress line on stderr.
 *
 * Shown only when stderr is a terminal and --quiet is off; then at most about
 * ten times a second (progress_update returns after one clock read on every
 * other step: no formatting on the hot path).  The line is rewritten in place
 * with '\r' and erased by progress_clear (before any other output, e.g. a loss
 * line) and progress_end.  One writer: single's loop, DP's device 0 thread,
 * DDP's rank 0.  Every function takes NULL for "no line here". */
#ifndef DDPBENCH_PROGRESS_H
#define DDPBENCH_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include "config/config.h"
#include "measure/timing.h"

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
    double loss;        /* the latest loss handed in (NAN: none yet) */
    double prev_call;   /* time of the last progress_update call */
    double step_est;    /* duration of the last step */
    bool shown;         /* a line is on the screen */
} progress_t;

/* label: the mode's name; total: optimizer steps.  Decides on/off once. */
void progress_init(progress_t *p, const config_t *c, const char *label, long total);
/* Same, with the terminal test given (for tests; f may be any stream). */
void progress_init_on(progress_t *p, bool on, FILE *f, const char *label, long total);

/* Will the line be redrawn at the end of the step starting now?  Then a
 * strategy fetches that step's loss for it (it costs a device sync). */
static inline bool progress_due(const progress_t *p)
{
    return p && p->on && now_s() + p->step_est >= p->next_s;
}

/* For a strategy that must decide a step ahead whether to fetch a loss
 * (DDP: fetching is a collective every rank must agree on): in how many
 * steps from the one now running the line is next due, judged by the last
 * step's duration; 0 when the line is off. */
static inline long progress_steps_to_due(const progress_t *p)
{
    if (!p || !p->on)
        return 0;
    double left = p->next_s - now_s();
    if (p->step_est <= 0.0 || left <= p->step_est)
        return 1;
    double n = left / p->step_est;
    return n > 1e6 ? 1000000 : (long)n + 1;
}

/* After step `step` (1-based) of epoch `epoch` (0-based), `samples` global
 * samples done in all, loss of this step or NAN when not known. */
void progress_update(progress_t *p, long step, long epoch, double loss, long samples);
/* Erase the line (it comes back at the next update). */
void progress_clear(progress_t *p);
/* Erase the line for good. */
void progress_end(progress_t *p);

#endif
