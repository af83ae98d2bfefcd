/* common/measure/step_meter.h: the bookkeeping around every training step, written once
 * for the three loops: step_meter_begin, a step_meter_lap after each phase, step_meter_end,
 * and step_meter_finish after the loop (docs/results.md, docs/gpu.md: a GPU's step is
 * read when the next one ends).  One writing thread a meter; a NULL sink: not here. */
#ifndef DDPBENCH_STEP_METER_H
#define DDPBENCH_STEP_METER_H

#include <stdbool.h>

#include "common/config/config.h"
#include "common/device/backend.h"
#include "common/measure/progress.h"
#include "common/nn/optim.h"
#include "common/measure/result.h"
#include "common/measure/timing.h"
#include "common/measure/trace.h"

typedef struct step_meter step_meter_t;
typedef struct step_rec step_rec_t;

typedef struct {
    const config_t *cfg;   /* --quiet, --json/--csv: where the loss line goes */
    device_stats_t *dev;   /* this device's phase times, rows and first step */
    trace_rec_t *trace;    /* --trace recorder, or NULL */
    step_times_t *times;   /* the step wall times this device keeps, or NULL */
    loss_log_t *log;       /* the loss log, or NULL; its keeper prints the loss line */
    double *final_loss;    /* the last logged loss, or NULL */
    step_story_t *story;   /* --explain: the told step's story (the callback adds to it) */
    int stagers;           /* devices that each stage their part of the batch (0, 1: one) */
    const char *progress;  /* the progress line's label ("single"); NULL: not drawn here */
    long total_steps;      /* the run's steps, for the progress line */
    backend_t *be;         /* the device whose queue the laps mark; NULL: the host clock */
    /* the device's FLOPs are counted from the model and its optimizer (NULL: none) */
    const model_spec_t *spec;
    const optim_t *optim;
    const char *place;     /* how the meter's own failures are named ("device 0"), or NULL */
    /* when a step's times are known, before they are reported (DDP's buckets); or NULL */
    void (*resolved)(void *ctx, step_meter_t *m, step_rec_t *r);
    void *ctx;
} step_meter_sinks_t;

/* What the loop knows when a step ends, for the report of that step. */
typedef struct {
    long samples;        /* what it adds to the kept step times' sample count */
    long global_samples; /* global samples it processed (the progress line) */
    long total;          /* steps in the run, for the loss line */
    long epoch;          /* 0-based */
    bool logs;           /* the loss line and log want this step's loss */
    double denom;        /* mean loss = sum of the fetched values / denom (> 0) */
} step_end_t;

/* One step on its way to being reported (the resolved callback's view). */
struct step_rec {
    long g;
    bool timed, first, open;
    int n, cap;              /* marks; mark 0 is the step's start */
    phase_t *ph;             /* the phase each mark ends (PH_COUNT: a plain mark) */
    backend_event_t **ev;
    double *t;               /* when each mark was passed (now_s clock), once resolved */
    double *cpu;             /* the thread's CPU clock at each lap (a work sample only) */
    double *rq;              /* the thread's run-queue wait so far at each lap */
    double rq_end;           /* a work sample's at its end (not sched) */
    bool work;               /* a work sample: the CPU clock is read at its laps */
    int nspan, capspan;
    struct meter_span *span; /* --trace / --explain events between two marks */
    long rows;
    int staged;              /* micro-batches the stager put on the device */
    long syncs_begin, syncs; /* the device's host syncs at begin, and in the step */
    long launch_begin[LAUNCH_KINDS], launches[LAUNCH_KINDS]; /* the same for its launches */
    bool chained;            /* it follows the previous step with nothing between */
    float *fetched;          /* values copied back (pinned on a device) */
    int nfetch, capfetch;
    bool queued_after;       /* a fetch was queued after the last marker */
    bool ratio;              /* the fetched pair is the loss's sum and denominator */
    double charge[PH_COUNT]; /* seconds no lap measured */
    double mean;             /* the step's mean loss (NAN: not fetched) */
    step_end_t end;
};

struct step_meter {
    step_meter_sinks_t to;
    step_rec_t rec[2];
    int cur;                 /* the record of the open (or last) step */
    bool deferred;           /* a device: steps report when the next one ends */
    double warm[PH_COUNT];   /* phase times of untimed steps (not reported) */
    double first_lap[PH_COUNT]; /* the told step (--explain): each phase's first lap */
    uint64_t row_bytes;      /* the bytes of a staged row (step_meter_staged) */
    long samples_done;       /* global samples of the steps reported so far */
    long rows_full;          /* the most global samples a step reported had */
    long last_g;             /* the last step that ended (-1: none) */
    long syncs_at_end;       /* the device's host syncs when it ended */
    double last_end_t;       /* when the last reported step's last marker passed */
    long resolved_g;         /* the last step reported (-1: none) ... */
    double resolved_dt;      /* ... and its wall time */
    step_times_t *work;      /* the sampled steps' work (work_cpu; NULL on a GPU) */
    double work_t;           /* when the last work sample began (now_s) */
    bool sched;              /* the run-queue wait is read at every lap, not in samples alone */
    bool sched_tried;        /* the file below was opened, or that failed */
    int sched_fd;            /* the stepping thread's /proc/thread-self/schedstat (-1: not open) */
    /* where samples alone read it: their laps' and waits' seconds, the others' laps */
    double rq_lap[PH_COUNT], rq_wait[PH_COUNT], rq_unread[PH_COUNT];
    progress_t progress;     /* the progress line (off unless to.progress names it) */
    progress_t *prog;        /* &progress when this meter draws it, else NULL */
    bool same_work;          /* steps queue the same work every time (step_meter_same_work) */
    int rc;                  /* the first failure (sticky), DDP_OK when none */
    char msg[ERR_LEN];
};

/* Set up (DDP_ERR_RUNTIME: out of memory), on the device's thread (it measures its peak). */
int step_meter_init(step_meter_t *m, const step_meter_sinks_t *to, char *err);
/* The device's peak measured again (in the last warm-up step), the faster kept. */
void step_meter_peak(step_meter_t *m);
void step_meter_free(step_meter_t *m);

/* Step g (0-based) begins: timed (after the warm-up) or not; first: --explain tells it. */
void step_meter_begin(step_meter_t *m, long g, bool timed, bool first);

/* The time since the last lap belongs to phase p: a marker on the queue. */
void step_meter_lap(step_meter_t *m, phase_t p);

/* A plain marker (no phase ends there), for step_meter_span; its index. */
int step_meter_mark(step_meter_t *m);

/* An event between two markers of this step (a copy between devices). */
typedef struct {
    int kind, lane;     /* traced on `lane` as `kind` (trace.h) ... */
    uint64_t bytes;     /* ... with its bytes, bucket and peer */
    int bucket, peer;
    int move;           /* in the told step, counted as this move_kind_t (-1: not) ... */
    int ops;            /* ... standing for this many operations (0 counts as 1) */
} meter_span_t;

/* Traced once the step has run; in the told step counted in first_move[s->move]. */
void step_meter_span(step_meter_t *m, int mark0, int mark1, const meter_span_t *s);

/* The stager put a micro-batch of rows (row_bytes each) on the device in this step. */
static inline void step_meter_staged(step_meter_t *m, uint64_t row_bytes)
{
    m->rec[m->cur].staged++;
    m->row_bytes = row_bytes;
}

/* A move outside the steps (DDP's initial broadcast), into the story if kept here. */
static inline void step_meter_moved(step_meter_t *m, move_kind_t k, uint64_t bytes, double seconds)
{
    if (m->to.story)
        m->to.story->move[k] = (move_stat_t){bytes, seconds, 1};
}

/* In the resolved callback: the story to add to when r is the told step, else NULL. */
static inline step_story_t *step_rec_story(const step_meter_t *m, const step_rec_t *r)
{
    return r->first ? m->to.story : NULL;
}

/* Queue a copy of n device floats (the loss sum, over end.denom) read when it reports. */
void step_meter_fetch(step_meter_t *m, const float *dev, int n);

/* The same for a pair: the loss is dev[0] / dev[1] (DDP's all-reduced sum and rows). */
void step_meter_fetch_ratio(step_meter_t *m, const float *dev);

/* What the open step's report will need, known when it begins (step_meter_end(NULL)). */
static inline void step_meter_plan(step_meter_t *m, const step_end_t *e)
{
    m->rec[m->cur].end = *e;
}

/* --cuda-graph: every step queues the same work (a graph's): always fetch and mark. */
static inline void step_meter_same_work(step_meter_t *m, bool on) { m->same_work = on; }

/* Does the open step fetch its loss (the log wants it, or a graph's)? */
static inline bool step_meter_logs(const step_meter_t *m)
{
    return m->rec[m->cur].end.logs || m->same_work;
}

/* This device computed rows sample rows in this step. */
static inline void step_meter_rows(step_meter_t *m, long rows) { m->rec[m->cur].rows += rows; }

/* Does the open step mark its copies (the told step, or a graph's)? */
static inline bool step_meter_marks(const step_meter_t *m)
{
    return m->rec[m->cur].first || m->same_work;
}

/* The step ends (e: what its report needs; NULL: as planned); steps whose times are
 * known report.  DDP_ERR_RUNTIME: a device call failed, the loss log cannot grow or a
 * logged loss is not finite (without --allow-nonfinite); DDP_ERR_INTERRUPTED: a signal. */
int step_meter_end(step_meter_t *m, const step_end_t *e, char *err);

/* After the loop: report the last step. */
int step_meter_finish(step_meter_t *m, char *err);

/* The last step reported so far and its wall time; false before the first. */
static inline bool step_meter_resolved(const step_meter_t *m, long *g, double *dt)
{
    *g = m->resolved_g;
    *dt = m->resolved_dt;
    return m->resolved_g >= 0;
}

/* The told step: the duration of the first lap of phase p (0 if none). */
static inline double step_meter_first_lap(const step_meter_t *m, phase_t p)
{
    return m->first_lap[p];
}

/* In the resolved callback: mark i's time; the last lap of phase p (false: none). */
static inline double step_rec_time(const step_rec_t *r, int i) { return r->t[i]; }
bool step_rec_last_lap(const step_rec_t *r, phase_t p, double *t0, double *t1);

/* After the run: the run's timed seconds less each device's phases (comm hidden
 * apart) charged to PH_SKEW, so they add up to the run's step time (docs/results.md). */
void step_meter_skew(run_result_t *r);

/* After the run: every device's first_move summed into the story (seconds: the slowest). */
void step_meter_story_merge(run_result_t *r);

#endif
