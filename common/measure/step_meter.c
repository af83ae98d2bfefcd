/* common/measure/step_meter.c: markers on the device's queue while a step is queued,
 * their times and all that follows from them once it has run (step_meter.h). */
#include "common/measure/step_meter.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/interrupt.h"
#include "common/base/status.h"

/* The work sample: the thread's CPU clock is a system call (1.2 us here; at every lap it made
 * the instrument 8x the seed-size step), so it is read only in timed steps that begin
 * WORK_PERIOD_S after the last sample, and in the first WORK_MIN_SAMPLES (a short run's figure). */
#define WORK_PERIOD_S 2e-3
#define WORK_MIN_SAMPLES 16

struct meter_span {
    int m0, m1;
    meter_span_t s;
};

/* Record the first failure; later calls of the step do nothing harmful. */
static void meter_fail(step_meter_t *m, int rc, const char *what)
{
    if (m->rc != DDP_OK)
        return;
    m->rc = rc;
    const char *why = m->to.be ? backend_last_error(m->to.be) : "out of memory";
    if (m->to.place)
        snprintf(m->msg, sizeof m->msg, "%s: %s: %s", m->to.place, what, why);
    else
        snprintf(m->msg, sizeof m->msg, "%s: %s", what, why);
}

int step_meter_init(step_meter_t *m, const step_meter_sinks_t *to, char *err)
{
    memset(m, 0, sizeof *m);
    m->to = *to;
    m->deferred = to->be && !backend_host_visible(to->be);
    if (!m->deferred && !(m->work = calloc(1, sizeof *m->work)))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the step meter");
    m->last_g = -1;
    m->resolved_g = -1;
    step_meter_peak(m);
    /* the run-queue wait (CPU only): every lap where the run draws or explains */
    m->sched_fd = -1;
    m->sched = !m->deferred && to->cfg &&
               (to->cfg->explain || to->cfg->trace_path[0] || to->cfg->report_path[0] ||
                to->cfg->desched);
    if (to->progress && to->cfg) { /* from here: the run's time and rate count from its start */
        progress_init(&m->progress, to->cfg, to->progress, to->total_steps);
        m->prog = &m->progress;
    }
    /* The loss values a step fetches: one per micro-batch, or DDP's two. */
    int cap = 2 + (to->cfg && to->cfg->accum > 0 ? to->cfg->accum : 1);
    for (int i = 0; i < 2; i++) {
        step_rec_t *r = &m->rec[i];
        r->capfetch = cap;
        r->fetched = m->deferred ? backend_alloc_host(to->be, (size_t)cap * sizeof(float))
                                 : calloc((size_t)cap, sizeof(float));
        if (!r->fetched) {
            step_meter_free(m);
            return err_set(err, DDP_ERR_RUNTIME, "out of memory for the step meter");
        }
    }
    return DDP_OK;
}

void step_meter_peak(step_meter_t *m)
{
    if (m->to.dev && m->to.be)
        m->to.dev->peak_flops = fmax(m->to.dev->peak_flops, backend_peak_flops(m->to.be));
}

void step_meter_free(step_meter_t *m)
{
    progress_end(m->prog); /* a fault must not leave a half line on the terminal */
    for (int i = 0; i < 2; i++) {
        step_rec_t *r = &m->rec[i];
        for (int k = 0; k < r->cap; k++)
            if (r->ev && r->ev[k])
                backend_event_free(m->to.be, r->ev[k]);
        free(r->ev);
        free(r->ph);
        free(r->t);
        free(r->cpu);
        free(r->rq);
        free(r->span);
        if (r->fetched) {
            if (m->deferred)
                backend_free_host(m->to.be, r->fetched);
            else
                free(r->fetched);
        }
        memset(r, 0, sizeof *r);
    }
    free(m->work);
    m->work = NULL;
    if (m->sched_fd >= 0)
        close(m->sched_fd);
    m->sched_fd = -1;
}

/* Seconds the calling thread waited on the run queue, from its schedstat file ("cpu_ns
 * run_delay_ns timeslices"): one pread; on any failure the phase is given up (0). */
static double run_delay_s(step_meter_t *m)
{
    char buf[96];
    ssize_t n = m->sched_fd >= 0 ? pread(m->sched_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) {
        m->sched = false;
        if (m->sched_fd >= 0)
            close(m->sched_fd);
        m->sched_fd = -1;
        return 0.0;
    }
    buf[n] = 0;
    char *end;
    strtoull(buf, &end, 10);
    unsigned long long wait = strtoull(end, &end, 10);
    return (double)wait * 1e-9;
}

/* Does step r read the run-queue wait (sched: every lap; else a sample's two ends)? */
static bool rq_read(const step_meter_t *m, const step_rec_t *r)
{
    return m->sched_fd >= 0 && (m->sched || r->work);
}

// ---------------------------------------------------------------------------
// while the step is queued

/* *p grown to n elements of its type (kept as it was when that fails). */
#define GROW(p, n) ((p) = grown((p), (size_t)(n) * sizeof *(p), &ok))
static void *grown(void *p, size_t bytes, bool *ok)
{
    void *q = realloc(p, bytes);
    *ok = *ok && q;
    return q ? q : p;
}

/* Room for one more mark in r (events are made once and reused). */
static bool mark_room(step_meter_t *m, step_rec_t *r)
{
    if (r->n < r->cap)
        return true;
    int cap = r->cap ? 2 * r->cap : 32;
    bool ok = true;
    GROW(r->ph, cap), GROW(r->t, cap), GROW(r->cpu, cap), GROW(r->rq, cap), GROW(r->ev, cap);
    if (!ok) {
        meter_fail(m, DDP_ERR_RUNTIME, "out of memory for step markers");
        return false;
    }
    for (int k = r->cap; k < cap; k++) {
        r->ev[k] = NULL;
        if (m->to.be && !(r->ev[k] = backend_event_new(m->to.be, true))) {
            r->cap = k;
            meter_fail(m, DDP_ERR_RUNTIME, "creating a step marker");
            return false;
        }
    }
    r->cap = cap;
    return true;
}

/* A marker here on the queue; its index, or -1.  lap: it ends a lap or the step. */
static int mark_at(step_meter_t *m, phase_t p, bool lap)
{
    step_rec_t *r = &m->rec[m->cur];
    if (!r->open || m->rc != DDP_OK || !mark_room(m, r))
        return -1;
    int i = r->n;
    r->ph[i] = p;
    r->queued_after = false;
    /* The run-queue wait, read before the clock: the read is a system call, where a
     * busy core's scheduler likes to switch, and a wait after the clock's reading would
     * count in this lap while its time is the next's. */
    r->rq[i] = rq_read(m, r) && lap && (m->sched || i == 0) ? run_delay_s(m) : 0.0;
    if (m->to.be) {
        int rc = backend_event_record(m->to.be, r->ev[i]);
        if (rc != DDP_OK) {
            meter_fail(m, rc, "recording a step marker");
            return -1;
        }
    } else {
        r->t[i] = now_s();
    }
    /* the work figure: this thread's CPU clock at each lap splits the step by phase */
    r->cpu[i] = r->work && lap ? thread_cpu_s() : 0.0;
    r->n++;
    return i;
}

void step_meter_begin(step_meter_t *m, long g, bool timed, bool first)
{
    m->cur ^= 1;
    step_rec_t *r = &m->rec[m->cur];
    /* (this record's previous step was reported by the step_meter_end between) */
    r->g = g;
    r->timed = timed;
    r->first = first;
    r->open = true;
    r->n = 0;
    r->nspan = 0;
    r->rows = 0;
    r->staged = 0;
    r->nfetch = 0;
    r->ratio = false;
    r->mean = NAN;
    memset(r->charge, 0, sizeof r->charge);
    r->syncs_begin = m->to.be ? backend_host_syncs(m->to.be) : 0;
    for (int k = 0; k < LAUNCH_KINDS; k++)
        r->launch_begin[k] = m->to.be ? backend_launches(m->to.be, (launch_kind_t)k) : 0;
    /* nothing waited for the device since the last step: the GPU went straight on */
    r->chained = m->deferred && m->last_g == g - 1 && r->syncs_begin == m->syncs_at_end;
    /* A work sample: decided before the step from the clock alone (as the last step's
     * end read it: no reading of its own), so the choice does not depend on the step. */
    if (!m->deferred && !m->sched_tried) { /* this thread's, opened on it, once */
        m->sched_tried = true;
        m->sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        m->sched = m->sched && m->sched_fd >= 0;
    }
    r->work = false;
    if (timed && m->work) {
        double now = m->last_end_t > 0.0 ? m->last_end_t : now_s();
        if (m->work->n < WORK_MIN_SAMPLES || now - m->work_t >= WORK_PERIOD_S) {
            r->work = true;
            m->work_t = now;
        }
    }
    mark_at(m, PH_COUNT, true);
}

void step_meter_lap(step_meter_t *m, phase_t p) { mark_at(m, p, true); }

int step_meter_mark(step_meter_t *m) { return mark_at(m, PH_COUNT, false); }

void step_meter_span(step_meter_t *m, int mark0, int mark1, const meter_span_t *s)
{
    step_rec_t *r = &m->rec[m->cur];
    if (mark0 < 0 || mark1 < 0 || m->rc != DDP_OK)
        return;
    if (r->nspan == r->capspan) {
        int cap = r->capspan ? 2 * r->capspan : 16;
        struct meter_span *s = realloc(r->span, (size_t)cap * sizeof *s);
        if (!s) {
            meter_fail(m, DDP_ERR_RUNTIME, "out of memory for trace events");
            return;
        }
        r->span = s;
        r->capspan = cap;
    }
    r->span[r->nspan++] = (struct meter_span){mark0, mark1, *s};
}

void step_meter_fetch(step_meter_t *m, const float *dev, int n)
{
    step_rec_t *r = &m->rec[m->cur];
    if (m->rc != DDP_OK)
        return;
    if (r->nfetch + n > r->capfetch) {
        meter_fail(m, DDP_ERR_RUNTIME, "too many values fetched in one step");
        return;
    }
    /* queued after the work that wrote them; read once the step's last marker passed */
    int rc = m->to.be ? backend_d2h_async(m->to.be, r->fetched + r->nfetch, dev,
                                          (size_t)n * sizeof(float))
                      : (memcpy(r->fetched + r->nfetch, dev, (size_t)n * sizeof(float)), DDP_OK);
    if (rc != DDP_OK) {
        meter_fail(m, rc, "fetching the loss");
        return;
    }
    r->nfetch += n;
    r->queued_after = true;
}

void step_meter_fetch_ratio(step_meter_t *m, const float *dev)
{
    step_meter_fetch(m, dev, 2);
    m->rec[m->cur].ratio = true;
}

// ---------------------------------------------------------------------------
// once the step has run

bool step_rec_last_lap(const step_rec_t *r, phase_t p, double *t0, double *t1)
{
    int prev = 0;
    bool found = false;
    for (int i = 1; i < r->n; i++) {
        if (r->ph[i] == PH_COUNT)
            continue;
        if (r->ph[i] == p) {
            *t0 = r->t[prev];
            *t1 = r->t[i];
            found = true;
        }
        prev = i;
    }
    return found;
}

/* The step's work: the CPU seconds this thread ran in it, less its laps of waiting
 * (phase_waits: a wait may spin, for another device's work or the wire): a busy
 * machine stretches the wall time far more than this, the figure the A/B gate judges
 * on the CPU (docs/gate.md). */
static double work_cpu(const step_rec_t *r)
{
    double w = 0.0;
    int prev = 0;
    for (int i = 1; i < r->n; i++) {
        phase_t p = r->ph[i];
        if (p == PH_COUNT)
            continue;
        if (!phase_waits(p))
            w += r->cpu[i] - r->cpu[prev];
        prev = i;
    }
    phase_t last = r->ph[prev];
    if (prev > 0 && prev < r->n - 1 && !phase_waits(last))
        w += r->cpu[r->n - 1] - r->cpu[prev];
    return w;
}

/* A closed step's marker times, after a wait for its last marker. */
static int read_markers(step_meter_t *m, step_rec_t *r)
{
    backend_t *be = m->to.be;
    if (!be)
        return DDP_OK;
    /* Why wait: the step's markers and fetched values are complete once
     * its last marker is; the GPU has the next step queued meanwhile. */
    int rc = m->deferred ? backend_event_sync(be, r->ev[r->n - 1]) : DDP_OK;
    if (rc != DDP_OK) {
        meter_fail(m, rc, "waiting for a step");
        return m->rc;
    }
    for (int i = 0; i < r->n; i++)
        if ((rc = backend_event_time(be, r->ev[i], &r->t[i])) != DDP_OK) {
            meter_fail(m, rc, "reading a step marker");
            return m->rc;
        }
    return DDP_OK;
}

/* A work sample read at its ends alone: its laps' run-queue waits into r->rq.  A lap
 * where the thread computes waited its wall time beyond its CPU time, exactly (42.38 ms
 * of single's forward laps against every lap's reading, 42.34); the rest went to the
 * laps where it may sleep, in proportion to their wall time beyond their CPU time. */
static void rq_estimate(step_rec_t *r)
{
    double total = fmax(r->rq_end - r->rq[0], 0.0), fixed = 0.0, loose = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        double kf = fixed > total ? total / fixed : 1.0;
        double kl = loose > 0.0 ? fmin(fmax(total - kf * fixed, 0.0) / loose, 1.0) : 0.0;
        double acc = r->rq[0];
        int prev = 0;
        for (int i = 1; i < r->n; i++) {
            bool last = i == r->n - 1;
            if (r->ph[i] == PH_COUNT && !(last && prev > 0)) {
                r->rq[i] = acc; /* a plain mark, or the end of a step of no lap */
                continue;
            }
            phase_t p = r->ph[i] == PH_COUNT ? r->ph[prev] : r->ph[i];
            double u = fmax(r->t[i] - r->t[prev] - (r->cpu[i] - r->cpu[prev]), 0.0);
            if (pass == 0)
                *(phase_waits(p) ? &loose : &fixed) += u;
            acc += u * (phase_waits(p) ? kl : kf);
            r->rq[i] = acc;
            prev = i;
        }
    }
}

/* A timed lap of phase p, d seconds, q descheduled (read: measured), for the estimate. */
static void sampled(step_meter_t *m, const step_rec_t *r, phase_t p, double d, double q, bool read)
{
    if (!m->sched && r->timed) {
        *(read ? &m->rq_lap[p] : &m->rq_unread[p]) += d;
        m->rq_wait[p] += read ? q : 0.0;
    }
}

/* The step's laps into mine[] by phase (and --trace), the descheduled time apart. */
static void laps(step_meter_t *m, step_rec_t *r, double *mine)
{
    trace_rec_t *tr = m->to.trace;
    bool rq = rq_read(m, r);
    if (rq && !m->sched)
        rq_estimate(r);
    bool seen[PH_COUNT] = {false};
    int prev = 0;
    /* run-queue wait beyond a lap's wall time (a preemption between a mark's two
     * readings) is the following laps' */
    double carry = 0.0;
    for (int i = 1; i < r->n; i++) {
        phase_t p = r->ph[i];
        if (p == PH_COUNT)
            continue; /* a plain marker splits no lap */
        double d = r->t[i] - r->t[prev];
        /* the lap's run-queue wait, drawn at its end, at most its wall time */
        double q = 0.0;
        if (rq) {
            double raw = fmax(r->rq[i] - r->rq[prev], 0.0) + carry;
            q = fmin(raw, d);
            carry = raw - q;
        }
        mine[p] += d - q;
        mine[PH_DESCHED] += q;
        sampled(m, r, p, d, q, rq);
        trace_phase(tr, p, r->t[prev], r->t[i] - q);
        if (q > 0.0)
            trace_phase(tr, PH_DESCHED, r->t[i] - q, r->t[i]);
        if (r->first && !seen[p])
            m->first_lap[p] = d - q;
        seen[p] = true;
        prev = i;
    }
    /* Work queued after the last lap (a fetch) belongs to the last phase. */
    if (prev > 0 && prev < r->n - 1) {
        double d = r->t[r->n - 1] - r->t[prev];
        double q = rq ? fmin(fmax(r->rq[r->n - 1] - r->rq[prev], 0.0) + carry, d) : 0.0;
        mine[r->ph[prev]] += d - q;
        mine[PH_DESCHED] += q;
        sampled(m, r, r->ph[prev], d, q, rq);
    }
}

/* The step's spans (--trace), the told step's moves in moved[], the loss's mean. */
static void spans(step_meter_t *m, step_rec_t *r, move_stat_t *moved)
{
    for (int i = 0; i < r->nspan; i++) {
        const struct meter_span *sp = &r->span[i];
        const meter_span_t *s = &sp->s;
        double t0 = r->t[sp->m0], t1 = r->t[sp->m1];
        trace_event(m->to.trace, (trace_kind_t)s->kind, (trace_lane_t)s->lane, t0, t1, s->bytes,
                    s->bucket, s->peer);
        if (r->first && s->move >= 0 && s->move < MOVE_COUNT) {
            moved[s->move].bytes += s->bytes;
            moved[s->move].ops += s->ops > 0 ? s->ops : 1;
            moved[s->move].seconds += t1 - t0;
        }
    }
    if (r->ratio && r->nfetch == 2) {
        r->mean = (double)r->fetched[0] / (double)r->fetched[1];
    } else if (r->nfetch > 0 && r->end.denom > 0.0) {
        double sum = 0.0;
        for (int i = 0; i < r->nfetch; i++)
            sum += r->fetched[i];
        r->mean = sum / r->end.denom;
    }
}

/* The step into the device's totals (or the warm-up's), the step times, the story. */
static void account(step_meter_t *m, const step_rec_t *r, double *mine, const move_stat_t *moved,
                    step_story_t *story)
{
    device_stats_t *dev = m->to.dev;
    double *acc = r->timed ? dev->phase_s : m->warm;
    for (int p = 0; p < PH_COUNT; p++) {
        mine[p] += r->charge[p];
        acc[p] += mine[p];
    }
    double t_begin = r->t[0], t_end = r->t[r->n - 1];
    if (r->chained && m->last_end_t > 0.0 && m->last_end_t < t_begin) {
        /* The GPU waited for the host to reach this step: idle, in the step. */
        double gap = t_begin - m->last_end_t;
        acc[PH_IDLE] += gap;
        mine[PH_IDLE] += gap;
        trace_phase(m->to.trace, PH_IDLE, m->last_end_t, t_begin);
        t_begin = m->last_end_t;
    }
    double dt = t_end - t_begin;
    m->last_end_t = t_end;
    m->resolved_g = r->g;
    m->resolved_dt = dt;
    trace_step_end(m->to.trace, t_begin, t_end);
    if (r->timed) {
        dev->rows += r->rows;
        dev->host_syncs += r->syncs;
        dev->synced_steps++;
        for (int k = 0; k < LAUNCH_KINDS; k++)
            dev->launches[k] += r->launches[k];
        if (m->to.times)
            step_times_add(m->to.times, dt, r->end.samples);
    }
    if (r->first) {
        memcpy(dev->first_phase_s, mine, sizeof dev->first_phase_s);
        dev->first_rows = r->rows;
        memcpy(dev->first_move, moved, sizeof dev->first_move);
    }
    if (story) {
        story->step = r->g;
        story->step_s = dt;
        story->filled = true;
        /* the batch: the step's global rows (each stager its part, in parallel) */
        int parts = m->to.stagers > 1 ? m->to.stagers : 1;
        story->move[MOVE_BATCH] = (move_stat_t){(uint64_t)r->end.global_samples * m->row_bytes,
                                                mine[PH_DATA] + mine[PH_H2D], r->staged * parts};
    }
}

/* The step's loss (a diverged run stops), its lines, and a signal that stops the run. */
static int say_step(step_meter_t *m, const step_rec_t *r)
{
    const step_end_t *e = &r->end;
    const config_t *c = m->to.cfg;
    /* an epoch's tail step: fewer global rows than the most a step had */
    bool tail = e->global_samples < m->rows_full;
    m->rows_full = e->global_samples > m->rows_full ? e->global_samples : m->rows_full;
    /* a logged loss is fetched: NaN or Inf stops the run rather than train garbage */
    if (e->logs && r->nfetch > 0 && !isfinite(r->mean) && !(c && c->allow_nonfinite)) {
        progress_clear(m->prog);
        m->rc = DDP_ERR_RUNTIME;
        snprintf(m->msg, sizeof m->msg,
                 "step %ld: the loss is %s: the training diverged (lower --lr; "
                 "--allow-nonfinite keeps going)",
                 r->g + 1, isnan(r->mean) ? "nan" : r->mean > 0 ? "inf" : "-inf");
        return m->rc;
    }
    if (e->logs) {
        if (m->to.final_loss)
            *m->to.final_loss = r->mean;
        if (m->to.log) {
            if (loss_log_add(m->to.log, r->g + 1, e->epoch, r->mean) != DDP_OK) {
                m->rc = DDP_ERR_RUNTIME;
                snprintf(m->msg, sizeof m->msg, "out of memory for the loss log");
                return m->rc;
            }
            progress_clear(m->prog); /* the loss line replaces it */
            if (c && !c->quiet && !c->loss_lines_off)
                fprintf(c->json || c->csv ? stderr : stdout,
                        "step %*ld/%ld  epoch %ld  loss %.6f%s\n", e->total >= 1000 ? 5 : 3,
                        r->g + 1, e->total, e->epoch + 1, r->mean,
                        tail ? "  (an epoch's tail: a mean over fewer rows)" : "");
        }
    }
    m->samples_done += e->global_samples;
    /* the line shows the losses the log took: none is fetched for it */
    progress_update(m->prog, r->g + 1, e->epoch, e->logs ? r->mean : NAN, m->samples_done);
    /* SIGINT/SIGTERM/SIGHUP: the run stops after the step it was in. */
    int sig = interrupt_pending();
    if (sig) {
        progress_clear(m->prog);
        m->rc = DDP_ERR_INTERRUPTED;
        /* On a device the step queued after this one runs too: name it. */
        long last = m->deferred && m->rec[m->cur].g > r->g ? m->rec[m->cur].g : r->g;
        snprintf(m->msg, sizeof m->msg, "interrupted by SIG%s after step %ld of %ld",
                 sigabbrev_np(sig), last + 1, e->total);
        return m->rc;
    }
    return DDP_OK;
}

/* Read a closed step's times and report it. */
static int resolve(step_meter_t *m, step_rec_t *r)
{
    r->open = false;
    if (m->rc != DDP_OK || r->n == 0)
        return m->rc;
    TRY(read_markers(m, r));
    double mine[PH_COUNT] = {0};
    move_stat_t moved[MOVE_COUNT] = {{0}};
    trace_step_begin(m->to.trace, r->g, r->timed);
    laps(m, r, mine);
    spans(m, r, moved);
    /* --explain: backward as the meter saw it (the callback may know better) */
    step_story_t *story = r->first ? m->to.story : NULL;
    if (story)
        story->backward_s = m->first_lap[PH_BACKWARD];
    if (m->to.resolved)
        m->to.resolved(m->to.ctx, m, r);
    if (r->work)
        step_times_add(m->work, work_cpu(r), 0);
    account(m, r, mine, moved, story);
    return say_step(m, r);
}

int step_meter_end(step_meter_t *m, const step_end_t *e, char *err)
{
    step_rec_t *r = &m->rec[m->cur];
    if (e)
        r->end = *e;
    /* the last marker: its last lap, unless none or a fetch was queued after it */
    if (r->n < 2 || r->ph[r->n - 1] == PH_COUNT || r->queued_after)
        mark_at(m, PH_COUNT, true);
    if (rq_read(m, r) && !m->sched)
        r->rq_end = run_delay_s(m);
    step_rec_t *prev = &m->rec[m->cur ^ 1];
    int rc = DDP_OK;
    /* what the step queued, its last marker included */
    for (int k = 0; k < LAUNCH_KINDS; k++)
        r->launches[k] = m->to.be ? backend_launches(m->to.be, (launch_kind_t)k) - r->launch_begin[k] : 0;
    if (m->deferred) {
        /* report the previous step, then count this step's waits, that one included */
        if (prev->open)
            rc = resolve(m, prev);
        r->syncs = m->to.be ? backend_host_syncs(m->to.be) - r->syncs_begin : 0;
    } else {
        r->syncs = m->to.be ? backend_host_syncs(m->to.be) - r->syncs_begin : 0;
        rc = resolve(m, r);
    }
    m->last_g = r->g;
    m->syncs_at_end = m->to.be ? backend_host_syncs(m->to.be) : 0;
    if (rc == DDP_OK)
        rc = m->rc;
    return rc == DDP_OK ? DDP_OK : err_set(err, rc, "%s", m->msg);
}

int step_meter_finish(step_meter_t *m, char *err)
{
    for (int k = 1; k >= 0; k--) { /* the older open record first */
        step_rec_t *r = &m->rec[m->cur ^ k];
        if (r->open && resolve(m, r) != DDP_OK)
            break;
    }
    /* the steps that did not read the run-queue wait: each phase's share in the samples */
    for (int p = 0; !m->sched && m->to.dev && p < PH_COUNT; p++)
        if (m->rq_lap[p] > 0.0) {
            double q = m->rq_unread[p] * m->rq_wait[p] / m->rq_lap[p], *ph = m->to.dev->phase_s;
            ph[p] -= q;
            ph[PH_DESCHED] += q;
        }
    device_stats_t *dev = m->to.dev;
    if (dev && m->to.spec)
        dev->flops = (double)dev->rows * model_flops_per_row(m->to.spec);
    if (dev && m->to.optim)
        dev->flops_optim = (double)dev->synced_steps * optim_flops(m->to.optim);
    if (m->work && m->work->n > 0) {
        /* low quantiles: other processes grow a step's CPU time, hardly the quickest's */
        device_stats_t *d = m->to.dev;
        d->work_steps = m->work->n;
        d->work_cpu_mean = m->work->timed_s / (double)m->work->n;
        d->work_cpu_p10 = step_times_quantile(m->work, 10);
        d->work_cpu_p25 = step_times_quantile(m->work, 25);
        d->work_cpu_p50 = step_times_quantile(m->work, 50);
    }
    return m->rc == DDP_OK ? DDP_OK : err_set(err, m->rc, "%s", m->msg);
}

void step_meter_story_merge(run_result_t *r)
{
    step_story_t *st = &r->story;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++)
        for (int k = 0; k < MOVE_COUNT; k++) {
            const move_stat_t *v = &r->dev[d].first_move[k];
            st->move[k].bytes += v->bytes;
            st->move[k].ops += v->ops;
            if (v->seconds > st->move[k].seconds)
                st->move[k].seconds = v->seconds;
        }
}

void step_meter_skew(run_result_t *r)
{
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        double own = 0.0;
        for (int p = 0; p < PH_COUNT; p++)
            if (p != PH_COMM_HIDDEN && p != PH_SKEW)
                own += r->dev[d].phase_s[p];
        r->dev[d].phase_s[PH_SKEW] = r->times.timed_s - own;
    }
}
