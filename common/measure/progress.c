/* common/measure/progress.c: the progress line on stderr (see progress.h). */
#include "common/measure/progress.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

void progress_init_on(progress_t *p, bool on, FILE *f, const char *label, long total)
{
    memset(p, 0, sizeof *p);
    p->on = on && f;
    p->f = f;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->t_start = p->last_s = now_s();
    /* the first line after one period: short runs never draw one */
    p->next_s = p->t_start + PROGRESS_PERIOD_S;
    p->loss = NAN;
}

void progress_init(progress_t *p, const config_t *c, const char *label, long total)
{
    progress_init_on(p, !c->quiet && isatty(STDERR_FILENO), stderr, label, total);
}

static void fmt_eta(char *buf, size_t n, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
    else
        snprintf(buf, n, "%.0fh%02.0fm", floor(s / 3600), fmod(s / 60, 60));
}

void progress_update(progress_t *p, long step, long epoch, double loss, long samples)
{
    if (!p || !p->on)
        return;
    long rows = samples - p->seen;
    p->seen = samples;
    p->rows_full = rows > p->rows_full ? rows : p->rows_full;
    if (!isnan(loss)) {
        p->loss = loss;
        p->loss_step = step;
        p->loss_rows = rows;
    }
    double t = now_s();
    if (t < p->next_s)
        return;
    double dt = t - p->last_s;
    double rate = dt > 0 ? (double)(samples - p->last_samples) / dt : 0.0;
    double per_step = step > 0 ? (t - p->t_start) / (double)step : 0.0;
    char eta[32], loss_s[96] = "";
    fmt_eta(eta, sizeof eta, per_step * (double)(p->total - step));
    if (!isnan(p->loss) && p->loss_rows < p->rows_full) /* whose, and over how few rows */
        snprintf(loss_s, sizeof loss_s, "  loss %.4f (step %ld: a tail of %ld row%s)", p->loss,
                 p->loss_step, p->loss_rows, p->loss_rows == 1 ? "" : "s");
    else if (!isnan(p->loss)) /* the last logged loss, which may be a few steps old: say whose */
        snprintf(loss_s, sizeof loss_s, "  loss %.4f (step %ld)", p->loss, p->loss_step);
    /* \r back to column 0, the line, then erase what a longer old line left */
    fprintf(p->f, "\r%s  step %ld/%ld  epoch %ld%s  %.0f samples/s  ETA %s\033[K", p->label,
            step, p->total, epoch + 1, loss_s, rate, eta);
    fflush(p->f);
    p->shown = true;
    p->last_s = t;
    p->last_samples = samples;
    p->next_s = t + PROGRESS_PERIOD_S;
}

void progress_clear(progress_t *p)
{
    if (!p || !p->on || !p->shown)
        return;
    fputs("\r\033[K", p->f);
    fflush(p->f);
    p->shown = false;
}

void progress_end(progress_t *p)
{
    if (!p)
        return;
    progress_clear(p);
    p->on = false;
}
