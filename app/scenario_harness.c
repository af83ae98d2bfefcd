/* app/scenario_harness.c: what every scenario's runs stand on (see
 * scenario_impl.h): its paragraphs, its runs and when one ends it, its
 * variants (a mistake planted or not), its verdict and its page. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/interrupt.h"
#include "common/train/strategy.h"
#include "app/eval/evaluate.h"
#include "app/scenario_impl.h"

#define WIDTH 96

/* A paragraph under a heading, wrapped at WIDTH. */
void scen_para(scen_t *s, const char *head, const char *fmt, ...)
{
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (head[0])
        fprintf(s->out, "  %s\n", head);
    int col = 0;
    for (char *save = NULL, *w = strtok_r(text, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        int wl = (int)strlen(w);
        if (col > 0 && col + 1 + wl > WIDTH - 4) {
            fputc('\n', s->out);
            col = 0;
        }
        fprintf(s->out, "%s%s", col ? " " : "    ", w);
        col += (col ? 1 : 4) + wl;
    }
    fputc('\n', s->out);
}

/* One of the scenario's runs (r's last one freed); none once a signal asked to stop. */
int scen_run(const config_t *c, const dataset_t *d, run_result_t *r, char *err)
{
    result_free(r);
    if (interrupt_pending())
        return err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s before its next run",
                       sigabbrev_np(interrupt_pending()));
    return strategy_of(c->mode)->run(c, d, r, err);
}

/* Does this run end the scenario?  A signal that asked to stop (the run
 * stopped by it, or it came as the run ended) does, as it stops any run:
 * no next run, "ddpbench: stopped: ..." and 128 + the signal.  So does a
 * failure that is not the one the scenario reproduces (`expected`: the
 * scenario waits for this one), such as a rank killed: "ddpbench: error:"
 * naming the rank and the cause, exit 1.  scenario_main says it. */
bool scen_ended(scen_t *s, int rc, const char *err, bool expected)
{
    int sig = interrupt_pending();
    if (sig || rc == DDP_ERR_INTERRUPTED) {
        s->ended = DDP_ERR_INTERRUPTED;
        if (rc == DDP_ERR_INTERRUPTED)
            snprintf(s->err, sizeof s->err, "%s", err);
        else
            snprintf(s->err, sizeof s->err, "interrupted by SIG%s", sigabbrev_np(sig));
        return true;
    }
    if (rc != DDP_OK && !expected) {
        s->ended = rc == DDP_ERR_INPUT ? DDP_ERR_INPUT : DDP_ERR_RUNTIME;
        snprintf(s->err, sizeof s->err, "%s", err);
        return true;
    }
    return false;
}

config_t *scen_variant(scen_t *s, int i, mode_t_ m, plant_t p, unsigned watch)
{
    config_t *c = &s->alt[i];
    *c = s->cfg;
    c->mode = m;
    c->plant = getenv("DDPBENCH_SCENARIO_UNPLANT") ? (plant_t){0} : p;
    c->watch = watch;
    return c;
}

double scen_data_loss(scen_t *s, const run_result_t *r)
{
    double loss = NAN, acc;
    char err[ERR_LEN];
    if (!r->params || eval_params(&s->spec, s->cfg.loss, r->params, &s->data, &loss, &acc,
                                  err) != DDP_OK || loss < 0)
        return NAN;
    return loss;
}

/* why, when not shown: starting "no verdict" when the machine's time decided
 * it (exit 4, DDP_ERR_NOISY), else what was not shown (exit 1). */
static bool no_verdict(bool shown, const char *why)
{
    return !shown && strncmp(why, "no verdict", 10) == 0;
}

int scen_verdict(scen_t *s, const char *name, bool shown, const char *why)
{
    if (shown)
        fprintf(s->out, "scenario %s: behaved as described\n", name);
    else
        fprintf(s->out, "scenario %s: %s%s\n", name, no_verdict(shown, why) ? "" : "NOT as described: ",
                why);
    return shown ? 0 : no_verdict(shown, why) ? DDP_ERR_NOISY : 1;
}

/* --report: the scenario's runs on one page, its verdict line as the page's
 * verdict; then scen_verdict.  A page that cannot be written makes the
 * scenario fail (exit 1), with the error line. */
int scen_page(scen_t *s, const char *name, bool shown, const char *why, const run_result_t *runs,
                const char *const *labels, int n)
{
    if (!s->cfg.report_path[0])
        return scen_verdict(s, name, shown, why);
    char story[512], title[64], err[ERR_LEN];
    snprintf(story, sizeof story, "scenario %s: %s%s.", name,
             shown ? "behaved as described" : no_verdict(shown, why) ? "" : "NOT as described: ",
             shown ? "" : why);
    snprintf(title, sizeof title, "scenario %s", name);
    config_t *cfgs = s->page_cfg;
    for (int i = 0; i < n && i < PAGE_MAX_RUNS; i++) {
        cfgs[i] = s->cfg;
        cfgs[i].mode = runs[i].mode;
    }
    report_ctx_t ctx = {.cfg = &s->cfg, .spec = &s->spec, .data = &s->data};
    report_page_t p = {.ctx = &ctx, .title = title, .cfgs = cfgs, .runs = runs,
                       .labels = labels, .n = n, .story = story};
    int prc = report_page_write(s->cfg.report_path, &p, err) != DDP_OK;
    if (prc)
        fprintf(stderr, "ddpbench: error: %s\n", err);
    int vrc = scen_verdict(s, name, shown, why);
    return prc ? prc : vrc;
}

void scen_mem_line(scen_t *s, const char *label, const run_result_t *r, int d)
{
    char a[32], b[32];
    fprintf(s->out, "    %-22s %10s  (", label, report_fmt_bytes(a, sizeof a, (double)r->dev[d].mem_peak));
    int k = 0;
    for (int m = 0; m < MEM_KINDS; m++)
        if (r->dev[d].mem_split[m] > 0)
            fprintf(s->out, "%s%s %s", k++ ? ", " : "", mem_kind_name((mem_kind_t)m),
                    report_fmt_bytes(b, sizeof b, (double)r->dev[d].mem_split[m]));
    fprintf(s->out, ")\n");
}
