/* tests/unit/test_report_page.c: --report's page from real runs: the runs
 * record their steps for it without --trace (and record nothing without
 * either), the step shown is the recorded timed step closest to the median,
 * DDP's buckets carry their ready point, and the page holds one lane per
 * device and stream, one phase bar per column of compare's table, one memory
 * bar per device, and nothing that could fetch (the browser test,
 * tests/e2e/e2e_page.sh, opens it for real). */
#include <math.h>
#include <unistd.h>

#include "app/report/report_page.h"
#include "testutil.h"

typedef struct {
    config_t cfg;
    model_spec_t spec;
    dataset_t data;
    run_result_t res;
} run_t;

static void run_one(run_t *r, const char *args)
{
    char err[ERR_LEN];
    memset(r, 0, sizeof *r);
    tu_load(&r->cfg, &r->spec, &r->data, args, err);
    int rc = strategy_of(r->cfg.mode)->run(&r->cfg, &r->data, &r->res, err);
    cr_assert_eq(rc, DDP_OK, "%s: %s", args, err);
}

static void run_free(run_t *r)
{
    result_free(&r->res);
    data_free(&r->data);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    static char buf[1 << 21];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

#define COMMON "--model seed-linear --backend cpu --quiet --steps 12 --warmup-steps 3"

Test(report_page, recorders_follow_report_alone)
{
    run_t a, b;
    run_one(&a, "--mode single " COMMON);
    cr_assert_null(a.res.trace[0], "without --report or --trace nothing is recorded");
    run_one(&b, "--mode single " COMMON " --report /tmp/unused.html");
    cr_assert_not_null(b.res.trace[0], "--report records the steps the page draws");
    cr_assert_leq(b.res.trace[0]->steps, TRACE_MAX_STEPS, "bounded: at most %d steps",
                  TRACE_MAX_STEPS);
    run_free(&a);
    run_free(&b);
}

Test(report_page, the_step_shown_is_timed_and_closest_to_the_median)
{
    run_t r;
    run_one(&r, "--mode dp --gpus 0,1 " COMMON " --report /tmp/unused.html");
    page_step_t s;
    report_page_pick_step(&r.res, &s);
    cr_assert_gt(s.step, r.res.warmup_steps, "step %d is a warm-up step", s.step);
    cr_assert_eq(s.recorded, r.res.steps - r.res.warmup_steps);
    report_stats_t st;
    report_stats(&r.res, NULL, &st);
    /* no other recorded step is closer to the median (a step's time: its
     * slowest device's), and the span drawn holds every device's step */
    const trace_rec_t *t = r.res.trace[0];
    double mine = fabs(s.dur - st.step_p50);
    for (uint32_t i = 0; i < t->n; i++) {
        if (t->ev[i].kind != TR_STEP)
            continue;
        double dur = t->ev[i].t_end - t->ev[i].t_begin;
        for (uint32_t j = 0; j < r.res.trace[1]->n; j++) {
            const trace_event_t *e = &r.res.trace[1]->ev[j];
            if (e->kind == TR_STEP && e->step == t->ev[i].step) {
                dur = fmax(dur, e->t_end - e->t_begin);
                if (e->step == s.step)
                    cr_assert(e->t_begin >= s.t0 && e->t_end <= s.t1, "device 1's step is cut");
            }
        }
        if (t->ev[i].step == s.step)
            cr_assert(t->ev[i].t_begin >= s.t0 && t->ev[i].t_end <= s.t1, "device 0's step is cut");
        else
            cr_assert_leq(mine, fabs(dur - st.step_p50) + 1e-12, "step %d is closer",
                          t->ev[i].step);
    }
    run_free(&r);
}

Test(report_page, ddp_buckets_start_from_their_ready_point)
{
    run_t r;
    run_one(&r, "--mode ddp --gpus 0,1 " COMMON " --report /tmp/unused.html");
    int buckets = 0;
    for (int d = 0; d < 2; d++)
        for (uint32_t i = 0; i < r.res.trace[d]->n; i++) {
            const trace_event_t *e = &r.res.trace[d]->ev[i];
            if (e->kind != TR_ALLREDUCE)
                continue;
            buckets++;
            cr_assert_gt(e->t_ready, 0.0, "bucket %d has no ready point", e->bucket);
            cr_assert_leq(e->t_ready, e->t_begin);
        }
    cr_assert_gt(buckets, 0);
    run_free(&r);
}

Test(report_page, lanes_bars_and_nothing_to_fetch)
{
    static run_t r[3];
    run_one(&r[0], "--mode single " COMMON " --report /tmp/unused.html");
    run_one(&r[1], "--mode dp --gpus 0,1,2 " COMMON " --report /tmp/unused.html");
    run_one(&r[2], "--mode ddp --gpus 0,1 " COMMON " --report /tmp/unused.html");
    static run_result_t runs[3];
    config_t cfgs[3];
    for (int i = 0; i < 3; i++) {
        runs[i] = r[i].res;
        cfgs[i] = r[i].cfg;
    }
    report_ctx_t ctx = {.cfg = &r[0].cfg, .spec = &r[0].spec, .data = &r[0].data};
    report_page_t p = {.ctx = &ctx, .title = "compare", .cfgs = cfgs, .runs = runs, .n = 3};
    char path[128], err[ERR_LEN];
    snprintf(path, sizeof path, "/tmp/ddpbench-test-page-%d.html", (int)getpid());
    cr_assert_eq(report_page_check(path, err), DDP_OK, "%s", err);
    cr_assert_eq(report_page_write(path, &p, err), DDP_OK, "%s", err);
    const char *html = slurp(path);
    if (getenv("DDPBENCH_KEEP_PAGE")) /* to look at it: the path on stderr */
        fprintf(stderr, "page: %s\n", path);
    else
        unlink(path);
    /* single: 1 lane; dp: 3 devices x (compute, copies); ddp: 2 ranks x (compute, comm) */
    cr_assert_eq(count(html, "<g class=\"lane\""), 1 + 6 + 4, "lanes");
    cr_assert_eq(count(html, "data-stream=\"comm\""), 2);
    cr_assert_eq(count(html, "data-stream=\"copies\""), 3);
    /* single, dp dev0, dp others, ddp dev0, ddp others */
    cr_assert_eq(count(html, "<g class=\"bar\""), 5, "phase bars");
    cr_assert_eq(count(html, "<g class=\"mbar\""), 1 + 3 + 2, "memory bars");
    cr_assert(strstr(html, "Content-Security-Policy"), "the page forbids requests");
    cr_assert_null(strstr(html, "http://"));
    cr_assert_null(strstr(html, "https://"));
    cr_assert_null(strstr(html, " src="));
    cr_assert_null(strstr(html, "href="));
    /* the timeline names its step, and DDP's buckets wait from their ready point */
    cr_assert(strstr(html, "the run's median step"));
    cr_assert(strstr(html, "data-kind=\"all-reduce\""));
    cr_assert(strstr(html, "data-kind=\"gather\""), "DP's copies are drawn");
    cr_assert(strstr(html, "<section id=\"predict\">"), "the predict section says how to fill it");
    cr_assert(strstr(html, "id=\"why-ddp\"") && strstr(html, "ring all-reduce"),
              "the page says why DDP wins, whatever the run measured");
    for (int i = 0; i < 3; i++)
        run_free(&r[i]);
}

Test(report_page, an_unwritable_path_is_named)
{
    char err[ERR_LEN];
    cr_assert_neq(report_page_check("/nonexistent-dir/x.html", err), DDP_OK);
    cr_assert(strstr(err, "--report /nonexistent-dir/x.html"), "%s", err);
}
